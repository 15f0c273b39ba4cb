// Helpers of the metrics endpoint's tests and of the suites that scrape it (tests/suites/metrics): a
// libuv loop running the HTTP endpoint on its own thread, a blocking HTTP client over real sockets,
// and a Metrics catalogue filled as traffic would.
#pragma once

#include <uv.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/metrics_endpoint.h"
#include "metrics/metrics.h"

namespace pgwarden::metrics::testing {

// Runs a MetricsEndpoint on a private loop in a thread. Everything that touches the server goes
// through onLoop(), which runs a function on the loop thread and waits for it.
class LoopServer {
 public:
  explicit LoopServer(net::MetricsEndpointOptions options, net::ReadinessCheck readiness = {});
  ~LoopServer();
  LoopServer(const LoopServer&) = delete;
  LoopServer& operator=(const LoopServer&) = delete;

  bool started() const { return start_status_.ok(); }
  const std::string& startError() const { return start_status_.error(); }
  int port() const { return port_; }
  Metrics& metrics() { return *metrics_; }
  void onLoop(const std::function<void()>& fn);
  size_t clientCount();
  // Closes the server, lets the loop drain and joins the thread. Returns uv_loop_close's result
  // (0 when every handle was closed).
  int stop();

 private:
  static void onAsync(uv_async_t* async);
  uv_loop_t loop_{};
  uv_async_t async_{};
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<net::MetricsEndpoint> server_;
  Status start_status_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::function<void()>> queue_;
  bool stopping_ = false;
  bool stopped_ = false;
  int close_rc_ = 0;
};

struct HttpResponse {
  int code = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string raw;
};

// A connected blocking TCP socket to 127.0.0.1:port with a receive timeout; -1 on failure.
int connectLocal(int port, std::chrono::milliseconds recv_timeout = std::chrono::seconds(5));
bool sendAll(int fd, std::string_view data);
// Reads until EOF, error or timeout. `closed` tells whether the peer ended the connection
// (EOF or reset) rather than the read timing out.
std::string readAll(int fd, bool* closed = nullptr);
// Sends `raw` on a new connection and reads the reply to EOF.
std::optional<HttpResponse> rawRequest(int port, std::string_view raw);
std::optional<HttpResponse> get(int port, const std::string& path,
                                const std::vector<std::string>& headers = {},
                                const std::string& method = "GET");
std::optional<HttpResponse> parseResponse(const std::string& raw);

size_t countOpenFds();
size_t residentBytes();
std::optional<std::string> findExecutable(const std::string& name);
// Runs a shell command, returns its exit status and combined output.
int runCommand(const std::string& command, std::string* output);
int freePort();

// Drives every family of the catalogue the way a day of traffic would, so that each name the
// dashboard queries has samples.
void populate(Metrics& m);

}  // namespace pgwarden::metrics::testing
