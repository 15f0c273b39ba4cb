// A loopback TCP proxy in front of a PostgreSQL server, on a thread of its own: it counts the
// Sync messages clients send, and can hold back what the server answers or cut every connection.
// So a test sees how many queries a client put on the wire before any answer reached it.
// Clients must connect with sslmode=disable gssencmode=disable (the first message is the startup).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace pgwarden::agent_test {

class PgWireProxy {
 public:
  explicit PgWireProxy(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(0);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd_, 8) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~PgWireProxy() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& l : links_) l.close();
    ::close(listen_fd_);
  }
  PgWireProxy(const PgWireProxy&) = delete;
  PgWireProxy& operator=(const PgWireProxy&) = delete;

  int port() const { return port_; }
  std::string dsn() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) +
           " user=postgres dbname=postgres sslmode=disable gssencmode=disable";
  }
  // While held, the server's bytes wait in the proxy.
  void hold(bool on) { hold_ = on; }
  // Closes every connection open now (later ones go through).
  void cut() { ++cuts_; }
  // Sync messages the clients sent so far: one per query a pipelining client puts on the wire.
  int syncs() const { return syncs_; }

 private:
  struct Link {
    int client = -1;
    int server = -1;
    std::string from_client;   // bytes not yet parsed into whole messages
    bool started = false;      // the untyped startup message went by
    std::string to_client;     // held back
    void close() {
      if (client >= 0) ::close(client);
      if (server >= 0) ::close(server);
      client = server = -1;
    }
  };

  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }
  static bool sendAll(int fd, const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  static uint32_t be32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return ntohl(v);
  }

  // Counts Syncs among the whole frontend messages in l.from_client.
  void parseClient(Link& l) {
    size_t at = 0;
    for (;;) {
      const size_t head = l.started ? 5 : 4;
      if (l.from_client.size() - at < head) break;
      const uint32_t len = be32(l.from_client.data() + at + (l.started ? 1 : 0));
      const size_t whole = (l.started ? 1 : 0) + len;
      if (len < 4 || l.from_client.size() - at < whole) break;
      if (l.started && l.from_client[at] == 'S') ++syncs_;
      l.started = true;
      at += whole;
    }
    l.from_client.erase(0, at);
  }

  void accept() {
    Link l;
    l.client = ::accept(listen_fd_, nullptr, nullptr);
    l.server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in up = loopback(upstream_port_);
    if (l.client < 0 || ::connect(l.server, reinterpret_cast<sockaddr*>(&up), sizeof up) != 0) {
      l.close();
      return;
    }
    links_.push_back(std::move(l));
  }

  // One read from `from` of link l; false when the link is over.
  bool pump(Link& l, bool from_client) {
    char buf[16384];
    const ssize_t n = ::recv(from_client ? l.client : l.server, buf, sizeof buf, 0);
    if (n <= 0) return false;
    if (from_client) {
      l.from_client.append(buf, static_cast<size_t>(n));
      parseClient(l);
      return sendAll(l.server, buf, static_cast<size_t>(n));
    }
    l.to_client.append(buf, static_cast<size_t>(n));
    return true;
  }

  void run() {
    int cuts_seen = cuts_;
    while (!stop_) {
      if (cuts_ != cuts_seen) {
        cuts_seen = cuts_;
        for (auto& l : links_) l.close();
      }
      for (auto& l : links_) {
        if (l.client >= 0 && !hold_ && !l.to_client.empty()) {
          if (!sendAll(l.client, l.to_client.data(), l.to_client.size())) l.close();
          l.to_client.clear();
        }
      }
      std::erase_if(links_, [](const Link& l) { return l.client < 0; });
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const auto& l : links_) {
        fds.push_back({l.client, POLLIN, 0});
        fds.push_back({l.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 5) <= 0) continue;
      for (size_t i = 0; i < links_.size(); ++i) {
        const bool ok = (!(fds[1 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) || pump(links_[i], true)) &&
                        (!(fds[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) || pump(links_[i], false));
        if (!ok) links_[i].close();
      }
      if (fds[0].revents & POLLIN) accept();
    }
  }

  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::vector<Link> links_;  // the proxy thread's only
  std::atomic<bool> stop_{false};
  std::atomic<bool> hold_{false};
  std::atomic<int> cuts_{0};
  std::atomic<int> syncs_{0};
};

}  // namespace pgwarden::agent_test
