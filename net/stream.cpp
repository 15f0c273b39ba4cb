// Stream: libuv handle ownership, reads into one loop-wide buffer, batched writes with a
// try-write fast path. libuv status codes are passed up as they are; owners decide.
#include "net/stream.h"

#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cassert>
#include <cstring>

#include "net/tls.h"

namespace pgwarden::net {

namespace {

// One read buffer per thread (one loop per thread): onRead hands its bytes to the owner, who
// copies what it keeps before returning, so the next read may reuse it.
thread_local char t_read_buffer[kReadBufferSize];

struct WriteReq {
  uv_write_t req;
  std::string data;
};

// Buffers that grew for an unusually large batch are released once drained, so an idle session
// keeps little memory.
constexpr size_t kKeepOutCapacity = 64 * 1024;

std::string formatAddr(const sockaddr_storage& ss, bool with_port) {
  char host[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return with_port ? std::string(host) + ":" + std::to_string(ntohs(a->sin_port)) : host;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return with_port ? "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port))
                     : host;
  }
  return "";
}

}  // namespace

Stream::Stream(uv_loop_t* loop, StreamEvents* events) : loop_(loop), events_(events) {
  std::memset(&h_, 0, sizeof(h_));
  std::memset(&connect_req_, 0, sizeof(connect_req_));
}

Stream::~Stream() {
  // The owner must wait for onStreamClosed; a handle freed while libuv holds it is a
  // use-after-free waiting to happen.
  assert(closed());
}

int Stream::initTcp() {
  const int rc = uv_tcp_init(loop_, &h_.tcp);
  if (rc == 0) {
    initialized_ = true;
    is_pipe_ = false;
    h_.tcp.data = this;
  }
  return rc;
}

int Stream::initPipe() {
  const int rc = uv_pipe_init(loop_, &h_.pipe, 0);
  if (rc == 0) {
    initialized_ = true;
    is_pipe_ = true;
    h_.pipe.data = this;
  }
  return rc;
}

int Stream::acceptFrom(uv_stream_t* listener) {
  const int rc = uv_accept(listener, handle());
  if (rc == 0 && !is_pipe_) uv_tcp_nodelay(&h_.tcp, 1);
  return rc;
}

int Stream::adoptFd(int fd) {
  const int rc = is_pipe_ ? uv_pipe_open(&h_.pipe, fd) : uv_tcp_open(&h_.tcp, fd);
  if (rc != 0) {
    ::close(fd);
    return rc;
  }
  if (!is_pipe_) uv_tcp_nodelay(&h_.tcp, 1);
  return 0;
}

int Stream::connectTcp(const struct sockaddr* addr) {
  connect_req_.data = this;
  const int rc = uv_tcp_connect(&connect_req_, &h_.tcp, addr, &Stream::onConnect);
  if (rc == 0) {
    uv_tcp_nodelay(&h_.tcp, 1);
    uv_tcp_keepalive(&h_.tcp, 1, 60);
  }
  return rc;
}

int Stream::connectPipe(const std::string& path) {
  connect_req_.data = this;
  uv_pipe_connect(&connect_req_, &h_.pipe, path.c_str(), &Stream::onConnect);
  return 0;
}

int Stream::startRead() {
  if (!open()) return UV_EINVAL;
  if (reading_) return 0;
  const int rc = uv_read_start(handle(), &Stream::onAlloc, &Stream::onRead);
  if (rc == 0) reading_ = true;
  return rc;
}

void Stream::stopRead() {
  if (!open() || !reading_) return;
  uv_read_stop(handle());
  reading_ = false;
}

int Stream::flush() {
  if (tls_ != nullptr) {
    const int rc = sealOut();
    if (rc != 0) return rc;
  }
  if (out_.empty() || !open()) return 0;
  if (writes_in_flight_ == 0) {
    // Fast path: the kernel usually takes the whole batch now, with no request allocated.
    uv_buf_t buf = uv_buf_init(out_.data(), static_cast<unsigned>(out_.size()));
    const int n = uv_try_write(handle(), &buf, 1);
    if (n == static_cast<int>(out_.size())) {
      out_.clear();
      if (out_.capacity() > kKeepOutCapacity) std::string().swap(out_);
      return 0;
    }
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
    } else if (n != UV_EAGAIN && n != UV_ENOSYS) {
      return n;
    }
  }
  auto* w = new WriteReq;
  w->data.swap(out_);
  w->req.data = this;
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  const int rc = uv_write(&w->req, handle(), &buf, 1, &Stream::onWrite);
  if (rc != 0) {
    delete w;
    return rc;
  }
  in_flight_ += w->data.size();
  ++writes_in_flight_;
  return 0;
}

size_t Stream::unsentBytes() const {
  if (!open()) return out_.size();
  return out_.size() + uv_stream_get_write_queue_size(reinterpret_cast<const uv_stream_t*>(&h_));
}

void Stream::releaseIdleBuffers() {
  if (out_.empty()) std::string().swap(out_);
  if (tls_plain_.empty()) std::string().swap(tls_plain_);
}

void Stream::close() {
  if (!initialized_ || closing_) return;
  closing_ = true;
  reading_ = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&h_), &Stream::onClose);
}

void Stream::closeWhenFlushed() {
  if (!open()) return;
  stopRead();
  // close_notify after the last message, so the peer knows the end was not truncated.
  if (tls_ != nullptr) {
    if (tls_->established() && !out_.empty() && sealOut() != 0) {
      close();
      return;
    }
    tls_->shutdown();
  }
  if (flush() != 0 || pendingBytes() == 0) {
    close();
    return;
  }
  close_when_flushed_ = true;
}

std::string Stream::peerName() const {
  if (!initialized_) return "";
  if (is_pipe_) return "unix";
  sockaddr_storage ss{};
  int len = sizeof(ss);
  if (uv_tcp_getpeername(&h_.tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return formatAddr(ss, true);
}

std::string Stream::peerHost() const {
  if (!initialized_) return "";
  if (is_pipe_) return "unix";
  sockaddr_storage ss{};
  int len = sizeof(ss);
  if (uv_tcp_getpeername(&h_.tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return formatAddr(ss, false);
}

void Stream::onAlloc(uv_handle_t* /*h*/, size_t /*suggested*/, uv_buf_t* buf) {
  buf->base = t_read_buffer;
  buf->len = sizeof(t_read_buffer);
}

void Stream::onRead(uv_stream_t* h, ssize_t n, const uv_buf_t* buf) {
  auto* self = static_cast<Stream*>(h->data);
  if (n > 0) {
    if (self->tls_ != nullptr) {
      self->onTlsData(buf->base, static_cast<size_t>(n));
      return;
    }
    self->events_->onStreamData(*self, buf->base, static_cast<size_t>(n));
  } else if (n < 0) {
    if (self->reading_) {
      uv_read_stop(h);
      self->reading_ = false;
    }
    if (!self->closing_) self->events_->onStreamEnd(*self, static_cast<int>(n));
  }
}

void Stream::onWrite(uv_write_t* req, int status) {
  auto* w = reinterpret_cast<WriteReq*>(req);
  auto* self = static_cast<Stream*>(req->data);
  self->in_flight_ -= w->data.size();
  --self->writes_in_flight_;
  delete w;
  if (self->close_when_flushed_ && !self->closing_ &&
      (status != 0 || self->pendingBytes() == 0)) {
    self->close();
    return;
  }
  // Writes cancelled by close() report UV_ECANCELED before the close callback; the owner is
  // already closing and does not need to hear about them.
  if (!self->closing_) self->events_->onStreamWritten(*self, status);
}

Status Stream::startTls(std::unique_ptr<TlsEngine> engine) {
  if (tls_ != nullptr) return Status::fail("TLS is already on");
  if (!out_.empty()) return Status::fail("cleartext bytes are waiting to be sent");
  tls_ = std::move(engine);
  if (tls_->hasOutput() && flush() != 0) return Status::fail("cannot write to the socket");
  return {};
}

// Plaintext in out() becomes records (held by the engine until the handshake ends), and out()
// then carries only ciphertext to the socket.
int Stream::sealOut() {
  if (!out_.empty()) {
    if (!tls_->write(out_).ok()) {
      tls_error_ = tls_->error();
      return UV_EPROTO;
    }
    out_.clear();
  }
  if (tls_->hasOutput()) out_ = tls_->takeOutput();
  return 0;
}

// Ciphertext from the socket: answers (handshake, alerts) go out at once, then the owner hears
// about a finished handshake, a failure, the plaintext, and close_notify, in that order.
void Stream::onTlsData(const char* data, size_t len) {
  const bool was_ready = tls_->established();
  tls_plain_.clear();
  const Status st = tls_->feed(data, len, tls_plain_);
  if (tls_->hasOutput() && flush() != 0 && st.ok()) {
    tls_error_ = "cannot write to the socket";
    events_->onStreamTlsError(*this);
    return;
  }
  if (!st.ok()) {
    tls_error_ = st.error();
    stopRead();
    events_->onStreamTlsError(*this);
    return;
  }
  if (!was_ready && tls_->established() && !closing_) events_->onStreamTlsReady(*this);
  if (!tls_plain_.empty() && !closing_) {
    std::string plain;
    plain.swap(tls_plain_);
    events_->onStreamData(*this, plain.data(), plain.size());
  }
  if (tls_->state() == TlsState::kClosed && !closing_ && reading_) {
    stopRead();
    events_->onStreamEnd(*this, UV_EOF);
  }
}

void Stream::onConnect(uv_connect_t* req, int status) {
  auto* self = static_cast<Stream*>(req->data);
  if (self->closing_) return;
  self->events_->onStreamConnected(*self, status);
}

void Stream::onClose(uv_handle_t* h) {
  auto* self = static_cast<Stream*>(h->data);
  self->closed_ = true;
  self->events_->onStreamClosed(*self);
}

}  // namespace pgwarden::net
