// Helpers shared by the metrics endpoint's tests (see metrics_endpoint_util.h).
#include "metrics_endpoint_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <sstream>

#include "metrics/process_metrics.h"

namespace pgwarden::metrics::testing {

LoopServer::LoopServer(net::MetricsEndpointOptions options, net::ReadinessCheck readiness) {
  uv_loop_init(&loop_);
  metrics_ = std::make_unique<Metrics>(BuildInfo{"0.0.0-test", "0123456789ab"});
  server_ = std::make_unique<net::MetricsEndpoint>(&loop_, *metrics_, options, std::move(readiness));
  start_status_ = server_->start();
  port_ = server_->port();
  async_.data = this;
  uv_async_init(&loop_, &async_, onAsync);
  thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
}

LoopServer::~LoopServer() { stop(); }

void LoopServer::onAsync(uv_async_t* async) {
  auto* self = static_cast<LoopServer*>(async->data);
  std::vector<std::function<void()>> work;
  bool stopping;
  {
    std::lock_guard lock(self->mu_);
    work.swap(self->queue_);
    stopping = self->stopping_;
  }
  for (auto& fn : work) fn();
  if (stopping) {
    self->server_->close();
    uv_close(reinterpret_cast<uv_handle_t*>(&self->async_), nullptr);
  }
}

void LoopServer::onLoop(const std::function<void()>& fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.push_back([fn, done] {
      fn();
      done->set_value();
    });
  }
  uv_async_send(&async_);
  future.wait();
}

size_t LoopServer::clientCount() {
  size_t n = 0;
  onLoop([&] { n = server_->clientCount(); });
  return n;
}

int LoopServer::stop() {
  if (stopped_) return close_rc_;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  uv_async_send(&async_);
  thread_.join();
  close_rc_ = uv_loop_close(&loop_);
  stopped_ = true;
  return close_rc_;
}

int connectLocal(int port, std::chrono::milliseconds recv_timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(recv_timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((recv_timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool sendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string readAll(int fd, bool* closed) {
  std::string out;
  char buf[16384];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (closed != nullptr) *closed = n == 0 || errno == ECONNRESET;
    return out;
  }
}

std::optional<HttpResponse> parseResponse(const std::string& raw) {
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || raw.compare(0, 9, "HTTP/1.1 ") != 0) return std::nullopt;
  HttpResponse r;
  r.raw = raw;
  r.code = std::atoi(raw.c_str() + 9);
  r.body = raw.substr(end + 4);
  std::istringstream head(raw.substr(0, end));
  std::string line;
  std::getline(head, line);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    r.headers[name] = value;
  }
  return r;
}

std::optional<HttpResponse> rawRequest(int port, std::string_view raw) {
  int fd = connectLocal(port);
  if (fd < 0) return std::nullopt;
  if (!sendAll(fd, raw)) {
    ::close(fd);
    return std::nullopt;
  }
  std::string reply = readAll(fd);
  ::close(fd);
  return parseResponse(reply);
}

std::optional<HttpResponse> get(int port, const std::string& path,
                                const std::vector<std::string>& headers,
                                const std::string& method) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& h : headers) req += h + "\r\n";
  req += "\r\n";
  return rawRequest(port, req);
}

size_t countOpenFds() { return static_cast<size_t>(readProcessStats().open_fds.value_or(0)); }

size_t residentBytes() {
  return static_cast<size_t>(readProcessStats().resident_memory_bytes.value_or(0));
}

std::optional<std::string> findExecutable(const std::string& name) {
  std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  path += ":/usr/bin:/usr/sbin:/bin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

int runCommand(const std::string& command, std::string* output) {
  std::FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) {
    if (output != nullptr) output->append(buf, n);
  }
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

void populate(Metrics& m) {
  m.client_connections.setCollector([](SampleSink& s) {
    s.add({"idle"}, 3);
    s.add({"active"}, 2);
    s.add({"startup"}, 1);
  });
  m.server_connections.setCollector([](SampleSink& s) {
    s.add({"pgwarden_reader/analytics", "idle", "10.0.0.1:5432"}, 4);
    s.add({"pgwarden_reader/analytics", "active", "10.0.0.2:5432"}, 2);
  });
  m.upstream_host_up.setCollector([](SampleSink& s) {
    s.add({"10.0.0.1:5432", "primary"}, 1);
    s.add({"10.0.0.2:5432", "replica"}, 1);
  });
  m.upstream_replica_lag.setCollector([](SampleSink& s) { s.add({"10.0.0.2:5432"}, 0.4); });
  m.upstream_host_failures.setCollector([](SampleSink& s) { s.add({"10.0.0.2:5432"}, 3); });
  m.client_connections_accepted.inc(10);
  m.client_connections_rejected.with({"auth_failure"}).inc(2);

  GroupSeries agents(m, "agents");
  agents.statements(Outcome::kOk, StatementIntent::kLookup).inc(5);
  agents.statements(Outcome::kDenied, StatementIntent::kLookup).inc(2);
  agents.statements(Outcome::kError, StatementIntent::kAggregation).inc();
  agents.statements(Outcome::kCancelled, StatementIntent::kAggregation).inc();
  agents.statements(Outcome::kBudget, StatementIntent::kLookup).inc();
  agents.duration(Outcome::kOk).observe(std::chrono::microseconds(850));
  agents.duration(Outcome::kOk).observe(std::chrono::milliseconds(12));
  agents.duration(Outcome::kDenied).observe(std::chrono::microseconds(40));
  agents.rowsReturned().inc(1234);
  agents.truncated().inc();
  agents.budgetExhausted().inc();
  // A group name with every character the format escapes: the exposition must still parse.
  GroupSeries odd(m, "ana\"lysts\\ and\nmore");
  odd.statements(Outcome::kOk, StatementIntent::kCatalog).inc();
  odd.duration(Outcome::kOk).observe(0.2);

  m.guard_duration.with({"require_predicate"}).observe(std::chrono::microseconds(20));
  m.guard_duration.with({"row_limit"}).observe(std::chrono::microseconds(3));
  m.guard_decisions.with({"agents", "require_predicate", "deny", "MISSING_PREDICATE"}).inc(2);
  m.guard_decisions.with({"agents", "row_limit", "warn", "LIMIT_ADDED"}).inc();
  m.conversations_live.set(4);
  m.upstream_connect_errors.with({"too_many_connections"}).inc();
  m.upstream_server_errors.with({"57"}).inc(3);
  m.upstream_cancel_requests.inc();
  m.setHistorySource("sqlite", [] { return HistorySnapshot{100, 2, 1, 7}; });
  m.external_guard_calls.with({"webhook"}).inc(3);
  m.external_guard_failures.with({"webhook"}).inc();
  m.external_guard_timeouts.with({"webhook"}).inc();
  m.external_guard_duration.with({"webhook"}).observe(std::chrono::milliseconds(35));
  m.external_guard_calls.with({"lua"}).inc(9);
  m.external_guard_duration.with({"lua"}).observe(std::chrono::microseconds(300));
  m.http_requests.with({"metrics", "200"}).inc();
  m.http_scrapes.with({"text"}).inc();
  m.http_connections_rejected.with({"max_clients"}).inc();
  // The families the daemon fills from loop state at scrape time, as a day of traffic would.
  m.pool_waiting.setCollector(
      [](SampleSink& s) { s.add({"pgwarden_reader/analytics", "10.0.0.1:5432"}, 1); });
  m.pool_assignments.setCollector([](SampleSink& s) { s.add({}, 40); });
  m.pool_reuse.setCollector([](SampleSink& s) { s.add({}, 38); });
  m.pool_wait.with({"transaction"}).observe(std::chrono::microseconds(300));
  m.mcp_requests.setCollector([](SampleSink& s) { s.add({"handled"}, 12); });
  m.mcp_sessions.setCollector([](SampleSink& s) { s.add({}, 2); });
  m.mcp_streams.setCollector([](SampleSink& s) { s.add({}, 1); });
  m.mcp_tool_calls.setCollector([](SampleSink& s) { s.add({"query", "ok"}, 7); });
  m.tool_calls.setCollector([](SampleSink& s) { s.add({"daily_revenue", "ok"}, 3); });
  m.write_transactions.setCollector([](SampleSink& s) { s.add({"committed"}, 4); });
  m.rows_written.setCollector([](SampleSink& s) { s.add({}, 17); });
  m.writes_undone.setCollector([](SampleSink& s) { s.add({}, 1); });
  m.client_stall_closes.setCollector([](SampleSink& s) { s.add({}, 1); });
  m.screen_probes.setCollector([](SampleSink& s) { s.add({"absent"}, 1); });
  m.catalog_stats_age.setCollector([](SampleSink& s) { s.add({"analytics"}, 42); });
  m.plan_cache_lookups.with({"hit"}).inc(9);
  m.plan_cache_lookups.with({"miss"}).inc(3);
  m.result_warnings.with({"agents", "UNKNOWN_VALUE"}).inc();
}

}  // namespace pgwarden::metrics::testing
