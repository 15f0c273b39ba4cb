// The metrics endpoint over the HTTP transport, on a real libuv loop (its own thread) driven
// through real sockets: routes, status codes, HEAD, auth, keep-alive, garbage, oversized and slow
// clients, the client cap, 1,000 requests in a row without growth, and a clean close; and the
// `metrics:` config section, without sockets.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "common/config_util.h"
#include "metrics_endpoint_util.h"

namespace pgwarden::metrics {
namespace {

using net::HttpAuth;

using namespace std::chrono_literals;
using testing::LoopServer;

net::MetricsEndpointOptions testOptions() {
  net::MetricsEndpointOptions o;
  o.listen = "127.0.0.1:0";
  return o;
}

// Polls `pred` for up to `limit`.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 3000ms) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

TEST(MetricsEndpoint, MetricsServesTheTextFormat) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started()) << s.startError();
  s.metrics().client_connections_accepted.inc(17);
  auto r = testing::get(s.port(), "/metrics");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r->headers["content-length"], std::to_string(r->body.size()));
  EXPECT_EQ(r->headers["connection"], "close");
  EXPECT_NE(r->body.find("# TYPE pgwarden_statements_total counter\n"), std::string::npos);
  EXPECT_NE(r->body.find("\npgwarden_client_connections_accepted_total 17\n"), std::string::npos);
  EXPECT_EQ(r->body.find("# EOF"), std::string::npos);
  EXPECT_EQ(s.metrics().http_scrapes.with({"text"}).value(), 1u);
  EXPECT_EQ(s.metrics().http_requests.with({"metrics", "200"}).value(), 1u);
}

TEST(MetricsEndpoint, MetricsServesTextEvenWhenOpenMetricsIsAsked) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  auto r = testing::get(s.port(), "/metrics", {"Accept: application/openmetrics-text"});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r->body.find("# EOF"), std::string::npos);
}

TEST(MetricsEndpoint, HealthzIsOk) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  auto r = testing::get(s.port(), "/healthz");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->body, "ok\n");
}

TEST(MetricsEndpoint, ReadyzFollowsTheReadinessCallback) {
  std::atomic<bool> ready{false};
  LoopServer s(testOptions(), [&] {
    return ready.load() ? net::Readiness{true, ""} : net::Readiness{false, "upstream unreachable"};
  });
  ASSERT_TRUE(s.started());
  auto down = testing::get(s.port(), "/readyz");
  ASSERT_TRUE(down.has_value());
  EXPECT_EQ(down->code, 503);
  EXPECT_EQ(down->body, "upstream unreachable\n");
  ready = true;
  auto up = testing::get(s.port(), "/readyz");
  ASSERT_TRUE(up.has_value());
  EXPECT_EQ(up->code, 200);
  EXPECT_EQ(up->body, "ready\n");
  EXPECT_EQ(s.metrics().http_requests.with({"readyz", "503"}).value(), 1u);
  EXPECT_EQ(s.metrics().http_requests.with({"readyz", "200"}).value(), 1u);
}

TEST(MetricsEndpoint, ThrowingCallbacksBecomeErrorResponsesNotCrashes) {
  LoopServer s(testOptions(), []() -> net::Readiness { throw std::runtime_error("boom"); });
  ASSERT_TRUE(s.started());
  s.metrics().client_connections.setCollector(
      [](SampleSink&) { throw std::runtime_error("collector failed"); });
  auto ready = testing::get(s.port(), "/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->code, 503);
  EXPECT_EQ(ready->body, "readiness check failed\n");
  auto scrape = testing::get(s.port(), "/metrics");
  ASSERT_TRUE(scrape.has_value());
  EXPECT_EQ(scrape->code, 500);
  s.metrics().client_connections.setCollector({});
  auto again = testing::get(s.port(), "/metrics");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->code, 200);
}

TEST(MetricsEndpoint, UnknownPathsAre404) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  for (const char* path : {"/", "/metrics/", "/metricsx", "/debug/pprof", "/healthz/x"}) {
    auto r = testing::get(s.port(), path);
    ASSERT_TRUE(r.has_value()) << path;
    EXPECT_EQ(r->code, 404) << path;
  }
  auto q = testing::get(s.port(), "/healthz?verbose=1");  // a query string does not matter
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->code, 200);
}

TEST(MetricsEndpoint, HeadSendsHeadersOnly) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  auto r = testing::get(s.port(), "/metrics", {}, "HEAD");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 200);
  EXPECT_TRUE(r->body.empty());
  EXPECT_GT(std::stoul(r->headers["content-length"]), 1000u);
  auto h = testing::get(s.port(), "/healthz", {}, "HEAD");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->headers["content-length"], "3");
  EXPECT_TRUE(h->body.empty());
}

TEST(MetricsEndpoint, OtherMethodsAre405AndBodiesAre413AtOnce) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  auto post = testing::get(s.port(), "/metrics", {}, "POST");
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->code, 405);
  EXPECT_EQ(post->headers["allow"], "GET, HEAD");
  // Refused when the headers end, without waiting for the body.
  auto body = testing::get(s.port(), "/metrics", {"Content-Length: 5"});
  ASSERT_TRUE(body.has_value());
  EXPECT_EQ(body->code, 413);
  auto chunked = testing::get(s.port(), "/metrics", {"Transfer-Encoding: chunked"});
  ASSERT_TRUE(chunked.has_value());
  EXPECT_EQ(chunked->code, 413);
}

TEST(MetricsEndpoint, KeepAliveServesSeveralRequestsOnOneConnection) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  int fd = testing::connectLocal(s.port(), 5000ms);
  ASSERT_GE(fd, 0);
  // Pipelined: the second waits for the first's answer; the third ends the connection.
  ASSERT_TRUE(testing::sendAll(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  const std::string reply = testing::readAll(fd, &closed);
  ::close(fd);
  EXPECT_TRUE(closed);
  const size_t second = reply.find("HTTP/1.1 ", 1);
  ASSERT_NE(second, std::string::npos) << reply;
  const size_t third = reply.find("HTTP/1.1 ", second + 1);
  ASSERT_NE(third, std::string::npos) << reply;
  auto a = testing::parseResponse(reply.substr(0, second));
  auto b = testing::parseResponse(reply.substr(second, third - second));
  auto c = testing::parseResponse(reply.substr(third));
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->headers["connection"], "keep-alive");
  EXPECT_EQ(a->body, "ok\n");
  EXPECT_EQ(b->code, 200);
  EXPECT_TRUE(b->body.empty());  // HEAD: the length of the body, without it
  EXPECT_GT(std::stoul(b->headers["content-length"]), 1000u);
  EXPECT_EQ(c->headers["connection"], "close");
  EXPECT_EQ(c->body, "ready\n");
  EXPECT_TRUE(eventually([&] { return s.clientCount() == 0; }));
}

TEST(MetricsEndpoint, GarbageGets400AndTheConnectionCloses) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  // (Empty lines before a request are skipped, as RFC 9112 section 2.2 asks: not garbage.)
  const std::string inputs[] = {
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11),  // TLS ClientHello
      "GET /metrics HTTP/9.9\r\n\r\n",
      "GET metrics HTTP/1.1\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n",
      std::string("GET /met\0rics HTTP/1.1\r\n\r\n", 26),
  };
  for (const auto& input : inputs) {
    int fd = testing::connectLocal(s.port(), 5000ms);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(testing::sendAll(fd, input));
    bool closed = false;
    auto started = std::chrono::steady_clock::now();
    std::string reply = testing::readAll(fd, &closed);
    ::close(fd);
    EXPECT_TRUE(closed) << "connection left open after garbage";
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);  // refused at once, no timeout
    auto r = testing::parseResponse(reply);
    ASSERT_TRUE(r.has_value()) << reply;
    const bool version = input.find("HTTP/9.9") != std::string::npos;
    EXPECT_EQ(r->code, version ? 505 : 400) << input;
    EXPECT_EQ(r->body.rfind(version ? "HTTP version" : "malformed HTTP request", 0), 0u) << r->body;
  }
  EXPECT_EQ(s.metrics().http_requests.with({"other", "400"}).value(), std::size(inputs) - 1);
  EXPECT_EQ(s.metrics().http_requests.with({"other", "505"}).value(), 1u);
  auto ok = testing::get(s.port(), "/healthz");  // and the server still serves
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->code, 200);
}

TEST(MetricsEndpoint, OversizedRequestsGet431AndClose) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  // Never terminated: refused as soon as 8 KiB have arrived.
  int fd = testing::connectLocal(s.port(), 5000ms);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::sendAll(fd, "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a')));
  bool closed = false;
  auto r = testing::parseResponse(testing::readAll(fd, &closed));
  ::close(fd);
  EXPECT_TRUE(closed);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 431);
  EXPECT_NE(r->body.find("too large"), std::string::npos);
  // Terminated, but over the limit.
  auto big = testing::get(s.port(), "/metrics", {"X-Pad: " + std::string(8500, 'b')});
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->code, 431);
  // Just under the limit is fine.
  auto fits = testing::get(s.port(), "/healthz", {"X-Pad: " + std::string(7000, 'c')});
  ASSERT_TRUE(fits.has_value());
  EXPECT_EQ(fits->code, 200);
}

TEST(MetricsEndpoint, ExtraBytesAfterTheRequestDoNotResetTheResponse) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  std::string junk(32 * 1024, 'j');
  auto r = testing::rawRequest(s.port(), "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n" + junk);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->headers["content-length"], std::to_string(r->body.size()));
  // Kept alive, the junk is the next request: its 400 follows the whole answer.
  auto kept = testing::rawRequest(s.port(), "GET /metrics HTTP/1.1\r\n\r\n" + junk);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->code, 200);
  const size_t length = std::stoul(kept->headers["content-length"]);
  ASSERT_GT(kept->body.size(), length);
  EXPECT_EQ(kept->body.compare(length, 12, "HTTP/1.1 400"), 0) << kept->body.substr(length);
}

TEST(MetricsEndpoint, RequestSentByteByByteIsServed) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  int fd = testing::connectLocal(s.port());
  ASSERT_GE(fd, 0);
  std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  for (char c : req) {
    ASSERT_TRUE(testing::sendAll(fd, std::string(1, c)));
    std::this_thread::sleep_for(1ms);
  }
  auto r = testing::parseResponse(testing::readAll(fd));
  ::close(fd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 200);
}

TEST(MetricsEndpoint, SlowlorisIsClosedAfterTheReadTimeout) {
  net::MetricsEndpointOptions o = testOptions();
  o.read_timeout = 400ms;
  LoopServer s(o);
  ASSERT_TRUE(s.started());
  int fd = testing::connectLocal(s.port(), 100ms);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::sendAll(fd, "GET /metrics HTTP/1.1\r\n"));
  auto started = std::chrono::steady_clock::now();
  // One header byte every 50 ms, each keeping the connection "busy", until the server answers 408
  // and hangs up.
  bool closed = false;
  std::string answer;
  std::string header = "X-Slow: " + std::string(200, 's');
  for (size_t i = 0; i < header.size() && !closed; ++i) {
    if (!testing::sendAll(fd, std::string(1, header[i]))) {
      closed = true;
      break;
    }
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);  // 100 ms receive timeout paces the loop
    if (n == 0 || (n < 0 && errno == ECONNRESET)) closed = true;
    if (n > 0) answer.append(buf, static_cast<size_t>(n));
  }
  if (closed) {
    answer += testing::readAll(fd);  // whatever of the answer was not read yet
  }
  auto elapsed = std::chrono::steady_clock::now() - started;
  ::close(fd);
  ASSERT_TRUE(closed) << "slow client still connected after "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                      << " ms";
  EXPECT_GE(elapsed, 300ms);  // not before the timeout (with the loop clock's slack)
  EXPECT_LT(elapsed, 3s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408 ", 0), 0u) << answer;
  EXPECT_EQ(s.metrics().http_connections_rejected.with({"read_timeout"}).value(), 1u);
  EXPECT_TRUE(eventually([&] { return s.clientCount() == 0; }));
}

TEST(MetricsEndpoint, SilentClientIsClosedAfterTheReadTimeout) {
  net::MetricsEndpointOptions o = testOptions();
  o.read_timeout = 200ms;
  LoopServer s(o);
  ASSERT_TRUE(s.started());
  int fd = testing::connectLocal(s.port(), 3000ms);
  ASSERT_GE(fd, 0);
  bool closed = false;
  auto started = std::chrono::steady_clock::now();
  std::string reply = testing::readAll(fd, &closed);
  auto elapsed = std::chrono::steady_clock::now() - started;
  ::close(fd);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(reply.empty());
  EXPECT_LT(elapsed, 2s);
}

TEST(MetricsEndpoint, ConcurrentClientsAreCappedAndHalfOpenOnesGiveWayOldestFirst) {
  net::MetricsEndpointOptions o = testOptions();
  o.max_clients = 4;
  o.read_timeout = 10s;
  LoopServer s(o);
  ASSERT_TRUE(s.started());
  // Four half-open clients fill the cap: one says nothing, three sent part of a request line.
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(testing::connectLocal(s.port(), 200ms));
    ASSERT_GE(idle.back(), 0);
    if (i > 0) {
      ASSERT_TRUE(testing::sendAll(idle.back(), "GET /hea"));
    }
    ASSERT_TRUE(eventually([&] { return s.clientCount() == static_cast<size_t>(i + 1); }));
  }
  // A probe still gets its answer, long before the read timeout: the oldest half-open client
  // was closed to make room for it.
  auto r = testing::get(s.port(), "/healthz");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 200);
  bool closed = false;
  EXPECT_TRUE(testing::readAll(idle[0], &closed).empty());
  EXPECT_TRUE(closed) << "the oldest half-open client is still connected";
  EXPECT_EQ(s.metrics().http_connections_rejected.with({"evicted"}).value(), 1u);
  EXPECT_EQ(s.metrics().http_connections_rejected.with({"max_clients"}).value(), 0u);
  // The younger ones are still there and are served when they finish their request.
  ASSERT_TRUE(testing::sendAll(idle[3], "lthz HTTP/1.1\r\n\r\n"));
  auto held = testing::parseResponse(testing::readAll(idle[3]));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->code, 200);
  // Probe after probe gets through while the half-open clients keep arriving.
  for (int round = 0; round < 5; ++round) {
    int extra = testing::connectLocal(s.port(), 200ms);
    ASSERT_GE(extra, 0);
    ASSERT_TRUE(testing::sendAll(extra, "GET /rea"));
    idle.push_back(extra);
    auto probe = testing::get(s.port(), "/readyz");
    ASSERT_TRUE(probe.has_value());
    EXPECT_EQ(probe->code, 200);
  }
  EXPECT_TRUE(eventually([&] { return s.clientCount() <= 4; }));
  for (int fd : idle) ::close(fd);
  EXPECT_TRUE(eventually([&] { return s.clientCount() == 0; }));
}

TEST(MetricsEndpoint, AThousandRequestsInARowDoNotGrowFdsOrMemory) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  testing::populate(s.metrics());
  auto scrape = [&](int i) {
    const char* paths[] = {"/metrics", "/healthz", "/readyz", "/nope"};
    auto r = testing::get(s.port(), paths[i % 4]);
    return r.has_value() && r->code == (i % 4 == 3 ? 404 : 200);
  };
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(scrape(i));  // warm-up: buffers, allocator arenas
  ASSERT_TRUE(eventually([&] { return s.clientCount() == 0; }));
  uint64_t scrapes_before = s.metrics().http_scrapes.with({"text"}).value();
  size_t fds_before = testing::countOpenFds();
  size_t rss_before = testing::residentBytes();
  auto started = std::chrono::steady_clock::now();
  int failures = 0;
  for (int i = 0; i < 1000; ++i) failures += scrape(i) ? 0 : 1;
  auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(failures, 0);
  ASSERT_TRUE(eventually([&] { return s.clientCount() == 0; }));
  size_t fds_after = testing::countOpenFds();
  size_t rss_after = testing::residentBytes();
  EXPECT_LE(fds_after, fds_before);
  std::printf("[ measure  ] 1000 requests in %lld ms; fds %zu -> %zu; RSS %zu -> %zu KiB\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()),
              fds_before, fds_after, rss_before / 1024, rss_after / 1024);
#if defined(__SANITIZE_ADDRESS__)
  // ASan keeps freed memory in quarantine, so RSS says nothing here; its leak check does.
#else
  EXPECT_LT(rss_after, rss_before + 4 * 1024 * 1024);
#endif
  EXPECT_EQ(s.metrics().http_scrapes.with({"text"}).value() - scrapes_before, 250u);
}

TEST(MetricsEndpoint, BearerTokenProtectsMetricsOnly) {
  net::MetricsEndpointOptions o = testOptions();
  o.auth = HttpAuth{HttpAuth::Kind::kBearer, "tok-42"};
  LoopServer s(o);
  ASSERT_TRUE(s.started());
  auto none = testing::get(s.port(), "/metrics");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->code, 401);
  EXPECT_EQ(none->headers["www-authenticate"], "Bearer");
  EXPECT_EQ(none->body.find("pgwarden_"), std::string::npos);
  auto wrong = testing::get(s.port(), "/metrics", {"Authorization: Bearer tok-43"});
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->code, 401);
  auto right = testing::get(s.port(), "/metrics", {"Authorization: Bearer tok-42"});
  ASSERT_TRUE(right.has_value());
  EXPECT_EQ(right->code, 200);
  auto health = testing::get(s.port(), "/healthz");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->code, 200);
}

TEST(MetricsEndpoint, BasicAuthProtectsMetrics) {
  net::MetricsEndpointOptions o = testOptions();
  o.auth = HttpAuth{HttpAuth::Kind::kBasic, "prom:pw"};
  LoopServer s(o);
  ASSERT_TRUE(s.started());
  auto none = testing::get(s.port(), "/metrics");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->code, 401);
  EXPECT_EQ(none->headers["www-authenticate"], "Basic realm=\"pgwarden\"");
  auto right = testing::get(s.port(), "/metrics", {"Authorization: Basic cHJvbTpwdw=="});
  ASSERT_TRUE(right.has_value());
  EXPECT_EQ(right->code, 200);
}

TEST(MetricsEndpoint, StartFailsWithTheAddressWhenThePortIsTaken) {
  LoopServer first(testOptions());
  ASSERT_TRUE(first.started());
  net::MetricsEndpointOptions o = testOptions();
  o.listen = "127.0.0.1:" + std::to_string(first.port());
  LoopServer second(o);
  EXPECT_FALSE(second.started());
  EXPECT_NE(second.startError().find(o.listen), std::string::npos) << second.startError();
  EXPECT_NE(second.startError().find("address already in use"), std::string::npos)
      << second.startError();
  EXPECT_EQ(second.stop(), 0);  // the half-opened listener was closed: no handle leaks
}

TEST(MetricsEndpoint, CloseHangsUpOnConnectedClients) {
  LoopServer s(testOptions());
  ASSERT_TRUE(s.started());
  int held = testing::connectLocal(s.port(), 3000ms);
  ASSERT_GE(held, 0);
  ASSERT_TRUE(eventually([&] { return s.clientCount() == 1; }));
  EXPECT_EQ(s.stop(), 0);  // closes the server; uv_loop_close then finds no handle left
  bool closed = false;
  testing::readAll(held, &closed);
  ::close(held);
  EXPECT_TRUE(closed);
}

TEST(MetricsEndpoint, CloseIsSafeTwiceAndLeavesNoHandle) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  Metrics m(BuildInfo{"v", "s"});
  {
    net::MetricsEndpoint never(&loop, m, testOptions(), {});
    never.close();  // before start: nothing to close
    never.close();
  }
  auto endpoint = std::make_unique<net::MetricsEndpoint>(&loop, m, testOptions(), net::ReadinessCheck{});
  ASSERT_TRUE(endpoint->start().ok());
  ASSERT_GT(endpoint->port(), 0);
  endpoint->close();
  endpoint->close();
  endpoint.reset();  // the transport keeps itself alive until its handles are closed
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// ---- the `metrics:` section, without sockets ----

class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    char name[] = "/tmp/pgw-metrics-XXXXXX";
    int fd = ::mkstemp(name);
    path_ = name;
    ::write(fd, content.data(), content.size());
    ::close(fd);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(MetricsConfig, DefaultsWhenAbsent) {
  net::MetricsEndpointOptions o = net::parseMetricsConfig(YAML::Node());
  EXPECT_EQ(o.listen, "127.0.0.1:9930");
  EXPECT_EQ(o.max_clients, 64u);
  EXPECT_EQ(o.read_timeout, std::chrono::seconds(10));
  EXPECT_EQ(o.auth.kind, HttpAuth::Kind::kNone);
}

TEST(MetricsConfig, ReadsEveryKey) {
  TempFile token("tok-123\n");
  YAML::Node n = YAML::Load(
      "listen: '[::1]:9999'\nmax_clients: 8\nread_timeout: 2s\n"
      "bearer_token_file: " +
      token.path() + "\n");
  net::MetricsEndpointOptions o = net::parseMetricsConfig(n);
  EXPECT_EQ(o.listen, "[::1]:9999");
  EXPECT_EQ(o.max_clients, 8u);
  EXPECT_EQ(o.read_timeout, std::chrono::seconds(2));
  EXPECT_EQ(o.auth.kind, HttpAuth::Kind::kBearer);
  EXPECT_EQ(o.auth.secret, "tok-123");
  TempFile basic("prom:secret\n");
  net::MetricsEndpointOptions b = net::parseMetricsConfig(YAML::Load("basic_auth_file: " + basic.path() + "\n"));
  EXPECT_EQ(b.auth.kind, HttpAuth::Kind::kBasic);
  EXPECT_EQ(b.auth.secret, "prom:secret");
  EXPECT_EQ(net::parseMetricsConfig(YAML::Load("listen: ''")).listen, "");
}

TEST(MetricsConfig, ErrorsNameTheKeyAndLine) {
  auto keyOf = [](const std::string& yaml) -> std::string {
    try {
      (void)net::parseMetricsConfig(YAML::Load(yaml));
    } catch (const config::ConfigError& e) {
      EXPECT_GT(e.line(), 0) << yaml;
      return e.key();
    }
    return "(no error)";
  };
  EXPECT_EQ(keyOf("listen: x\nbogus: 1\n"), "metrics.bogus");
  EXPECT_EQ(keyOf("listen: example.com:80\n"), "metrics.listen");
  EXPECT_EQ(keyOf("max_clients: 0\n"), "metrics.max_clients");
  EXPECT_EQ(keyOf("read_timeout: 0\n"), "metrics.read_timeout");
  TempFile bad("no-colon\n");
  EXPECT_EQ(keyOf("basic_auth_file: " + bad.path() + "\n"), "metrics.basic_auth_file");
  EXPECT_EQ(keyOf("bearer_token_file: /nonexistent/token\n"), "metrics.bearer_token_file");
  TempFile t("x\n");
  EXPECT_EQ(keyOf("bearer_token_file: " + t.path() + "\nbasic_auth_file: " + t.path() + "\n"),
            "metrics.basic_auth_file");
}

}  // namespace
}  // namespace pgwarden::metrics
