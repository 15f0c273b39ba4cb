// Upstream connect plumbing: async resolution, TCP or Unix connect, and CancelRequest delivery.
#include "net/upstream.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "protocol/messages.h"

namespace pgwarden::net {

struct Resolver::Req {
  uv_getaddrinfo_t req;
  Resolver* owner = nullptr;
  Callback cb;
  int port = 0;
};

int Resolver::resolve(const std::string& host, int port, Callback cb) {
  cancel();
  auto* r = new Req;
  r->owner = this;
  r->cb = std::move(cb);
  r->port = port;
  r->req.data = r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = uv_getaddrinfo(loop_, &r->req, &Resolver::onResolved, host.c_str(), nullptr,
                                &hints);
  if (rc != 0) {
    delete r;
    return rc;
  }
  req_ = r;
  return 0;
}

void Resolver::cancel() {
  if (!req_) return;
  req_->owner = nullptr;
  // If the lookup already runs on the thread pool this fails; the callback then finds no owner.
  uv_cancel(reinterpret_cast<uv_req_t*>(&req_->req));
  req_ = nullptr;
}

void Resolver::onResolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
  auto* r = static_cast<Req*>(req->data);
  Resolver* owner = r->owner;
  Callback cb = std::move(r->cb);
  const int port = r->port;
  delete r;
  if (!owner) {
    if (res) uv_freeaddrinfo(res);
    return;
  }
  owner->req_ = nullptr;
  if (status != 0 || !res) {
    if (res) uv_freeaddrinfo(res);
    cb(status != 0 ? status : UV_EAI_NONAME, nullptr);
    return;
  }
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  uv_freeaddrinfo(res);
  if (ss.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(static_cast<uint16_t>(port));
  } else if (ss.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(static_cast<uint16_t>(port));
  }
  cb(0, reinterpret_cast<const sockaddr*>(&ss));
}

std::string upstreamSocketPath(const UpstreamConfig& up) {
  std::string dir = up.host;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/.s.PGSQL." + std::to_string(up.port);
}

int initUpstreamStream(const UpstreamConfig& up, Stream& stream) {
  return up.hostIsSocketDir() ? stream.initPipe() : stream.initTcp();
}

int connectUpstream(const UpstreamConfig& up, Stream& stream, Resolver& resolver,
                    std::function<void(int status)> on_resolve_error) {
  if (up.hostIsSocketDir()) return stream.connectPipe(upstreamSocketPath(up));
  sockaddr_storage ss{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (uv_ip4_addr(up.host.c_str(), up.port, v4) == 0) {
    return stream.connectTcp(reinterpret_cast<sockaddr*>(&ss));
  }
  if (uv_ip6_addr(up.host.c_str(), up.port, v6) == 0) {
    return stream.connectTcp(reinterpret_cast<sockaddr*>(&ss));
  }
  Stream* s = &stream;
  return resolver.resolve(up.host, up.port,
                          [s, fail = std::move(on_resolve_error)](int status, const sockaddr* a) {
                            if (status != 0) {
                              fail(status);
                              return;
                            }
                            const int rc = s->connectTcp(a);
                            if (rc != 0) fail(rc);
                          });
}

CancelForwarder::CancelForwarder(uv_loop_t* loop, UpstreamConfig upstream,
                                 int32_t pid, int32_t key,
                                 std::function<void(CancelForwarder*)> on_done)
    : upstream_(std::move(upstream)),
      pid_(pid),
      key_(key),
      on_done_(std::move(on_done)),
      stream_(loop, this),
      resolver_(loop) {}

CancelForwarder::~CancelForwarder() = default;

void CancelForwarder::start() {
  if (initUpstreamStream(upstream_, stream_) != 0) {
    on_done_(this);
    return;
  }
  const int rc = connectUpstream(upstream_, stream_, resolver_, [this](int) { close(); });
  if (rc != 0) close();
}

void CancelForwarder::close() {
  resolver_.cancel();
  if (stream_.closed()) {
    on_done_(this);
    return;
  }
  stream_.close();
}

void CancelForwarder::onStreamData(Stream&, const char*, size_t) {}

void CancelForwarder::onStreamEnd(Stream&, int) { close(); }

void CancelForwarder::onStreamConnected(Stream&, int status) {
  if (status != 0) {
    close();
    return;
  }
  protocol::writeCancelRequest(stream_.out(), pid_, key_);
  if (stream_.flush() != 0) {
    close();
    return;
  }
  // The server closes its end once it has read the request; reading tells us when.
  if (stream_.startRead() != 0) close();
}

void CancelForwarder::onStreamWritten(Stream&, int status) {
  if (status != 0) close();
}

void CancelForwarder::onStreamClosed(Stream&) { on_done_(this); }

}  // namespace pgwarden::net
