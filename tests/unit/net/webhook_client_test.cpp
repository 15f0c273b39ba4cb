// The webhook client against a real HTTP server on loopback (webhook_server.py): allow, deny with a
// reason, slow past the timeout, connection refused, 500 then 200 (one retry), 4xx (no retry),
// garbage JSON, oversized answers, headers, cancel, the in-flight bound, and 50 requests to a
// 200 ms service finishing together rather than one after another. Every failure is carried
// through the guard to check that the client-facing reason holds no URL.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/unit/guards/agent_test_util.h"
#include "net/webhook_client.h"
#include "guards/webhook_guard.h"

namespace pgwarden::daemon {
namespace {

using agent_test::nowMs;
using agent_test::runUntil;
using guards::WebhookOutcome;
using Status = WebhookOutcome::Status;

class WebhookClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    ASSERT_GT(service_.port(), 0) << "the test policy service did not start";
    auto c = net::WebhookClient::create(&loop_, {});
    ASSERT_TRUE(c.ok()) << c.error();
    client_ = std::move(c.value());
  }
  void TearDown() override {
    client_.reset();
    agent_test::drainLoop(&loop_);
  }

  net::WebhookRequest request(const std::string& path, int timeout_ms = 2000, int retries = 0) {
    net::WebhookRequest r;
    r.url = service_.url(path);
    r.body = R"({"sql":"SELECT * FROM orders","tables":["public.orders"],"agent_id":"planner"})";
    r.timeout = std::chrono::milliseconds(timeout_ms);
    r.retries = retries;
    return r;
  }

  WebhookOutcome post(net::WebhookRequest r) {
    std::optional<WebhookOutcome> out;
    bool inside_post = true;
    client_->post(std::move(r), [&](WebhookOutcome o) {
      EXPECT_FALSE(inside_post) << "completion ran inside post()";
      out = std::move(o);
    });
    inside_post = false;
    EXPECT_TRUE(runUntil(&loop_, [&] { return out.has_value(); }, 15000));
    return out.value_or(WebhookOutcome{});
  }

  // What the client of pgwarden would see for this outcome, through the real guard.
  guards::GuardResult verdict(const WebhookOutcome& o) {
    guards::WebhookOptions opts;
    opts.url = service_.url("/x");
    return guards::WebhookGuard(opts).checkWebhookAnswer(o);
  }

  void expectNoUrl(const guards::GuardResult& g) {
    const std::string port = std::to_string(service_.port());
    for (const std::string& s : {std::string("127.0.0.1"), port, std::string("http")}) {
      EXPECT_EQ(g.message.find(s), std::string::npos) << g.message;
      EXPECT_EQ(g.hint.find(s), std::string::npos) << g.hint;
      EXPECT_EQ(g.facts.json(g.code).find(s), std::string::npos);
    }
  }

  uv_loop_t loop_{};
  agent_test::PolicyService service_;
  std::unique_ptr<net::WebhookClient> client_;
};

TEST_F(WebhookClientTest, Allow) {
  const WebhookOutcome o = post(request("/allow"));
  EXPECT_EQ(o.status, Status::kOk) << o.error;
  EXPECT_EQ(o.http_status, 200);
  EXPECT_EQ(o.attempts, 1);
  EXPECT_EQ(verdict(o).action, guards::Action::kAllow);
  EXPECT_EQ(client_->completed(), 1u);
  EXPECT_EQ(client_->inFlight(), 0u);
}

TEST_F(WebhookClientTest, DenyWithReason) {
  const WebhookOutcome o = post(request("/deny"));
  ASSERT_EQ(o.status, Status::kOk) << o.error;
  const auto v = verdict(o);
  EXPECT_EQ(v.action, guards::Action::kDeny);
  EXPECT_EQ(v.code, "TICKET_REQUIRED");
  EXPECT_EQ(v.message, "Queries on public.orders need a ticket; ask the user for one.");
  EXPECT_EQ(v.hint, "SELECT 1");
}

TEST_F(WebhookClientTest, SlowPastTheTimeout) {
  const int64_t t0 = nowMs();
  const WebhookOutcome o = post(request("/slow?ms=1500", 300, 3));
  const int64_t elapsed = nowMs() - t0;
  EXPECT_EQ(o.status, Status::kTimeout) << o.error;
  EXPECT_GE(elapsed, 250);
  EXPECT_LT(elapsed, 1200) << "the deadline covers retries too";
  const auto v = verdict(o);
  EXPECT_EQ(v.code, "POLICY_UNAVAILABLE");
  expectNoUrl(v);
}

TEST_F(WebhookClientTest, ConnectionRefused) {
  net::WebhookRequest r = request("/allow", 2000, 2);
  r.url = "http://127.0.0.1:" + std::to_string(agent_test::freePort()) + "/check";
  const WebhookOutcome o = post(std::move(r));
  EXPECT_EQ(o.status, Status::kTransport);
  EXPECT_EQ(o.attempts, 3) << "transport errors are retried";
  EXPECT_FALSE(o.error.empty());
  const auto v = verdict(o);
  EXPECT_EQ(v.action, guards::Action::kDeny);
  EXPECT_EQ(v.code, "POLICY_UNAVAILABLE");
  expectNoUrl(v);
}

TEST_F(WebhookClientTest, ServerErrorThenSuccessIsRetried) {
  const WebhookOutcome o = post(request("/flaky?key=a", 3000, 1));
  ASSERT_EQ(o.status, Status::kOk) << o.error;
  EXPECT_EQ(o.attempts, 2);
  EXPECT_EQ(verdict(o).code, "SECOND_TRY");
  // Without retries the 500 is the answer.
  const WebhookOutcome once = post(request("/flaky?key=b", 3000, 0));
  EXPECT_EQ(once.status, Status::kHttpError);
  EXPECT_EQ(once.http_status, 500);
  const auto v = verdict(once);
  EXPECT_EQ(v.code, "POLICY_UNAVAILABLE");
  expectNoUrl(v);
}

TEST_F(WebhookClientTest, ClientErrorsAreNotRetried) {
  const WebhookOutcome o = post(request("/status?code=403", 3000, 3));
  EXPECT_EQ(o.status, Status::kHttpError);
  EXPECT_EQ(o.http_status, 403);
  EXPECT_EQ(o.attempts, 1);
}

TEST_F(WebhookClientTest, GarbageJson) {
  const WebhookOutcome o = post(request("/garbage"));
  ASSERT_EQ(o.status, Status::kOk);
  const auto v = verdict(o);
  EXPECT_EQ(v.code, "POLICY_UNAVAILABLE");
  expectNoUrl(v);
}

TEST_F(WebhookClientTest, OversizedAnswerIsAFailure) {
  net::WebhookRequest r = request("/big", 3000, 2);
  r.max_response_bytes = 4096;
  const WebhookOutcome o = post(std::move(r));
  EXPECT_EQ(o.status, Status::kTransport);
  EXPECT_EQ(o.attempts, 1) << "a too-large answer is not retried";
  EXPECT_NE(o.error.find("larger than"), std::string::npos) << o.error;
}

TEST_F(WebhookClientTest, HeadersAndBodyReachTheService) {
  net::WebhookRequest r = request("/echo");
  r.headers = {{"Authorization", "Bearer tok-123"}, {"X-Tenant", "t1"}};
  const WebhookOutcome o = post(std::move(r));
  ASSERT_EQ(o.status, Status::kOk) << o.error;
  const auto answer = nlohmann::json::parse(o.body);
  const auto detail = nlohmann::json::parse(answer["detail"].get<std::string>());
  EXPECT_EQ(detail["headers"]["authorization"], "Bearer tok-123");
  EXPECT_EQ(detail["headers"]["x-tenant"], "t1");
  EXPECT_EQ(detail["headers"]["content-type"], "application/json");
  EXPECT_EQ(detail["ctx"]["agent_id"], "planner");
}

TEST_F(WebhookClientTest, CancelledRequestsNeverComplete) {
  int calls = 0;
  const uint64_t id = client_->post(request("/slow?ms=200"), [&](WebhookOutcome) { ++calls; });
  client_->post(request("/allow"), [&](WebhookOutcome) { calls += 10; });
  client_->cancel(id);
  client_->cancel(id);
  client_->cancel(987654);
  EXPECT_TRUE(runUntil(&loop_, [&] { return calls >= 10; }));
  runUntil(&loop_, [] { return false; }, 400);
  EXPECT_EQ(calls, 10);
  EXPECT_EQ(client_->inFlight(), 0u);
}

TEST_F(WebhookClientTest, FiftyConcurrentRequestsTakeAboutOneServiceTime) {
  constexpr int kRequests = 50;
  int done = 0;
  int ok = 0;
  const int64_t t0 = nowMs();
  for (int i = 0; i < kRequests; ++i) {
    client_->post(request("/slow?ms=200", 5000), [&](WebhookOutcome o) {
      ++done;
      ok += o.status == Status::kOk;
    });
  }
  ASSERT_TRUE(runUntil(&loop_, [&] { return done == kRequests; }, 20000));
  const int64_t elapsed = nowMs() - t0;
  std::printf("[ timing ] %d webhook requests to a 200 ms service: %lld ms\n", kRequests,
              static_cast<long long>(elapsed));
  EXPECT_EQ(ok, kRequests);
  EXPECT_LT(elapsed, 3000) << "requests ran one after another";
}

TEST(WebhookClientBounds, InFlightAndQueueAreBounded) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  agent_test::PolicyService service;
  {
    auto c = net::WebhookClient::create(&loop, {2, 1});
    ASSERT_TRUE(c.ok());
    auto& client = *c.value();
    std::vector<Status> results;
    for (int i = 0; i < 4; ++i) {
      net::WebhookRequest r;
      r.url = service.url("/slow?ms=150");
      r.body = "{}";
      r.timeout = std::chrono::milliseconds(3000);
      client.post(std::move(r), [&](WebhookOutcome o) { results.push_back(o.status); });
    }
    EXPECT_EQ(client.inFlight(), 2u);
    EXPECT_EQ(client.queued(), 1u);
    EXPECT_TRUE(results.empty()) << "even the refusal comes later";
    ASSERT_TRUE(runUntil(&loop, [&] { return results.size() == 4; }));
    EXPECT_EQ(results[0], Status::kOverloaded);
    EXPECT_EQ(std::count(results.begin(), results.end(), Status::kOk), 3);
  }
  agent_test::drainLoop(&loop);
}

TEST(WebhookClientBounds, DestroyedWithRequestsInFlight) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  agent_test::PolicyService service;
  int calls = 0;
  {
    auto c = net::WebhookClient::create(&loop, {});
    ASSERT_TRUE(c.ok());
    for (int i = 0; i < 5; ++i) {
      net::WebhookRequest r;
      r.url = service.url("/slow?ms=300");
      r.body = "{}";
      c.value()->post(std::move(r), [&](WebhookOutcome) { ++calls; });
    }
    runUntil(&loop, [] { return false; }, 100);
  }
  agent_test::drainLoop(&loop);
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace pgwarden::daemon
