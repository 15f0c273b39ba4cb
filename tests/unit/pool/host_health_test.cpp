// Read replicas: which host a read goes to after the health checks (up, in recovery, lag under
// max_replica_lag, in turn), a host a loop found unreachable leaving until a check finds it back,
// and a replica's pool handing its waiting clients to the primary's when its login finds nobody.
// The checks: each host on its own thread (one that hangs holds only its own), on a connection
// kept between checks (tested with libpq against the fake server playing PostgreSQL).
#include "pool/host_health.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fake_connection.h"
#include "fake_server.h"
#include "pool/pool.h"

using namespace pgwarden::daemon;
using namespace pgwarden::pool;
using namespace pgwarden::net;
using pgwarden::daemon::test::FakeFactory;

namespace {

UpstreamConfig twoReplicas() {
  UpstreamConfig up;
  up.host = "10.0.0.1";
  up.port = 5432;
  up.user = "app";
  up.replicas = {{"10.0.0.2", 5432}, {"10.0.0.3", 5433}};
  up.max_replica_lag = Millis(1000);
  return up;
}

// What each host answers, by host:port; a host not listed does not answer.
struct Answers {
  std::map<std::string, HostProbe> by_host;
  HostHealth::Probe probe() {
    return [this](const UpstreamHost& h, const UpstreamConfig&) {
      auto it = by_host.find(h.name());
      if (it == by_host.end()) return HostProbe{false, false, 0, "connection refused"};
      return it->second;
    };
  }
};

HostProbe primary() { return {true, false, 0, ""}; }
HostProbe replica(int64_t lag_ms) { return {true, true, lag_ms, ""}; }

TEST(HostHealth, ReadsTakeTheReplicasInTurnOnceAChecksFindsThem) {
  Answers a;
  HostHealth health(twoReplicas(), a.probe());
  EXPECT_EQ(health.pickForRead(), 0u) << "nothing checked yet: the primary";
  a.by_host = {
      {"10.0.0.1:5432", primary()}, {"10.0.0.2:5432", replica(0)}, {"10.0.0.3:5433", replica(200)}};
  health.checkAll();
  EXPECT_EQ(health.pickForRead(), 1u);
  EXPECT_EQ(health.pickForRead(), 2u);
  EXPECT_EQ(health.pickForRead(), 1u);
}

TEST(HostHealth, AReplicaLaggingAtOrOverTheLimitIsLeftOutAndTheLastOneLeavesThePrimary) {
  Answers a;
  HostHealth health(twoReplicas(), a.probe());
  a.by_host = {{"10.0.0.1:5432", primary()},
               {"10.0.0.2:5432", replica(1000)},
               {"10.0.0.3:5433", replica(10)}};
  health.checkAll();
  EXPECT_EQ(health.pickForRead(), 2u);
  EXPECT_EQ(health.pickForRead(), 2u);
  a.by_host["10.0.0.3:5433"] = replica(5000);
  health.checkAll();
  EXPECT_EQ(health.pickForRead(), 0u);
  const auto s = health.snapshot();
  EXPECT_EQ(s[2].lag_ms, 5000);
  EXPECT_TRUE(s[2].up) << "a lagging replica answers: it is up, only not read from";
}

TEST(HostHealth, AHostThatStopsAnsweringLeavesAndComesBackWithTheCheckThatFindsIt) {
  Answers a;
  HostHealth health(twoReplicas(), a.probe());
  a.by_host = {{"10.0.0.1:5432", primary()}, {"10.0.0.2:5432", replica(0)}};
  health.checkAll();
  EXPECT_EQ(health.pickForRead(), 1u);
  EXPECT_EQ(health.pickForRead(), 1u) << "10.0.0.3 never answered";
  health.markDown(1, "connection refused");
  EXPECT_EQ(health.pickForRead(), 0u) << "a loop found it unreachable: out at once";
  EXPECT_FALSE(health.snapshot()[1].up);
  EXPECT_EQ(health.snapshot()[1].failures, 1u);
  health.checkAll();
  EXPECT_EQ(health.pickForRead(), 1u) << "the next check found it answering";
  EXPECT_EQ(health.snapshot()[2].failures, 2u);
  EXPECT_EQ(health.snapshot()[2].last_error, "connection refused");
}

TEST(HostHealth, APromotedReplicaIsNoLongerReadFrom) {
  Answers a;
  HostHealth health(twoReplicas(), a.probe());
  a.by_host = {{"10.0.0.1:5432", primary()}, {"10.0.0.2:5432", primary()}};
  health.checkAll();
  EXPECT_EQ(health.pickForRead(), 0u);
}

TEST(HostHealth, AHostThatHangsHoldsOnlyItsOwnChecks) {
  UpstreamConfig up = twoReplicas();
  up.health_check_interval = Millis(10);
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  HostHealth health(up, [&](const UpstreamHost& h, const UpstreamConfig&) {
    if (h.name() == "10.0.0.2:5432") {  // takes the connection, then never answers
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return release; });
      return HostProbe{false, false, 0, "no answer"};
    }
    return h.name() == "10.0.0.1:5432" ? primary() : replica(0);
  });
  health.start();
  // The deadline only ends a run where the others' checks never come; it is not what is tested.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto s = health.snapshot();
    if (s[0].checks >= 3 && s[2].checks >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto s = health.snapshot();
  EXPECT_GE(s[0].checks, 3u);
  EXPECT_GE(s[2].checks, 3u) << "the replica after the hung one is checked on time";
  EXPECT_EQ(s[1].checks, 0u) << "the hung one is still in its first check";
  EXPECT_EQ(health.pickForRead(), 2u);
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  health.stop();
  EXPECT_EQ(health.snapshot()[1].checks, 1u);
}

// Plays PostgreSQL on the fake server: answers a login, and the check's query as a caught-up
// replica (unless `mute`), one connection at a time.
struct PlayedPostgres {
  test::FakeServer server;
  bool logged_in = false;
  bool mute = false;
  int logins = 0;
  int queries = 0;

  void step() {
    if (!server.accept()) return;
    server.pump();
    std::string out;
    if (!logged_in) {
      pgwarden::protocol::StartupPacket sp;
      if (!server.takeStartup(sp)) return;
      logged_in = true;
      ++logins;
      pgwarden::protocol::writeAuthOk(out);
      pgwarden::protocol::writeBackendKeyData(out, 4242, 7);
      pgwarden::protocol::writeReadyForQuery(out, 'I');
    }
    char type = 0;
    std::string body;
    while (server.takeMessage(type, body)) {
      if (type == 'X') {  // Terminate: the client closed this connection; take the next one
        hangUp();
        return;
      }
      if (type != 'Q') continue;
      ++queries;
      if (mute) continue;
      pgwarden::protocol::writeRowDescription(out, {{"pg_is_in_recovery", 16}, {"lag", 1700}});
      pgwarden::protocol::writeDataRow(out, {std::string_view("t"), std::string_view("0")});
      pgwarden::protocol::writeCommandComplete(out, "SELECT 1");
      pgwarden::protocol::writeReadyForQuery(out, 'I');
    }
    if (!out.empty()) server.send(out);
  }
  void hangUp() {
    server.hangUp();
    logged_in = false;
  }
  // One check on `c` from another thread (libpq blocks) while this one plays the server.
  HostProbe check(CheckConnection& c, const UpstreamConfig& up) {
    const UpstreamHost host{server.dir(), test::FakeServer::kPort};
    auto f = std::async(std::launch::async, [&] { return c.check(host, up); });
    while (f.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) step();
    return f.get();
  }
};

UpstreamConfig checkSettings() {
  UpstreamConfig up;
  up.user = "app";
  up.connect_timeout = Millis(2000);
  return up;
}

TEST(CheckConnection, KeepsItsConnectionBetweenChecksAndOpensANewOneWhenItFails) {
  PlayedPostgres pg;
  ASSERT_TRUE(pg.server.listening());
  CheckConnection c;
  const UpstreamConfig up = checkSettings();
  for (int i = 0; i < 3; ++i) {
    const HostProbe p = pg.check(c, up);
    EXPECT_TRUE(p.answered) << p.error;
    EXPECT_TRUE(p.in_recovery);
    EXPECT_EQ(p.lag_ms, 0);
  }
  EXPECT_EQ(c.connects(), 1u);
  EXPECT_EQ(pg.logins, 1);
  EXPECT_EQ(pg.queries, 3);
  // The server goes away (a restart): the next check finds the kept connection dead and logs in
  // again, in the same check.
  pg.hangUp();
  const HostProbe p = pg.check(c, up);
  EXPECT_TRUE(p.answered) << p.error;
  EXPECT_EQ(c.connects(), 2u);
  EXPECT_EQ(pg.logins, 2);
  // A reload that changes the login opens a new one too.
  UpstreamConfig other = up;
  other.user = "monitor";
  EXPECT_TRUE(pg.check(c, other).answered);
  EXPECT_EQ(c.connects(), 3u);
}

TEST(CheckConnection, AHostThatTakesTheQueryAndNeverAnswersFailsTheCheckAtItsBound) {
  PlayedPostgres pg;
  ASSERT_TRUE(pg.server.listening());
  CheckConnection c;
  EXPECT_TRUE(pg.check(c, checkSettings()).answered);
  pg.mute = true;
  const HostProbe p = pg.check(c, checkSettings());
  EXPECT_FALSE(p.answered);
  EXPECT_EQ(p.error, "no answer to the health check within 2000 ms");
  EXPECT_EQ(pg.queries, 2);
  EXPECT_EQ(c.connects(), 1u) << "a host that hangs is not logged in to again in the same check";
}

class ReplicaPoolTest : public ::testing::Test {
 protected:
  ReplicaPoolTest() : health_(twoReplicas(), answers_.probe()) {
    uv_loop_init(&loop_);
    auto factory = std::make_unique<FakeFactory>();
    factory_ = factory.get();
    manager_ = std::make_unique<PoolManager>(&loop_, counters_, std::move(factory),
                                             [this] { return now_; });
    manager_->setHealth(&health_);
    auto config = test::poolSettings();
    config->upstream = twoReplicas();
    manager_->setConfig(config);
    answers_.by_host = {{"10.0.0.1:5432", primary()}, {"10.0.0.2:5432", replica(0)}};
    health_.checkAll();
  }
  ~ReplicaPoolTest() override {
    manager_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }
  void turn() { uv_run(&loop_, UV_RUN_NOWAIT); }

  uv_loop_t loop_{};
  pgwarden::metrics::Counters counters_;
  uint64_t now_ = 1000000;
  Answers answers_;
  HostHealth health_;
  FakeFactory* factory_ = nullptr;
  std::unique_ptr<PoolManager> manager_;
  std::vector<std::string> log_;
};

TEST_F(ReplicaPoolTest, OnlyReadsOfGroupsThatAllowItGoToAReplicaWithItsAddress) {
  Pool& read = manager_->pool("appdb", false, false, true);
  EXPECT_EQ(read.host(), 1u);
  EXPECT_EQ(read.settings()->upstream.host, "10.0.0.2");
  EXPECT_EQ(read.stats().host, "10.0.0.2:5432");
  EXPECT_EQ(manager_->pool("appdb").host(), 0u);
  EXPECT_EQ(manager_->pool("appdb", false, false, false).settings()->upstream.host, "10.0.0.1");
  EXPECT_EQ(manager_->pool("appdb", false, true, true).host(), 0u) << "a write pool";
  EXPECT_EQ(manager_->pool("appdb", true, false, true).host(), 0u) << "pgwarden's own";
}

TEST_F(ReplicaPoolTest, AReplicaThatDoesNotAnswerHandsItsWaitersToThePrimary) {
  test::RecordingWaiter w("w", log_);
  Pool& replica = manager_->pool("appdb", false, false, true);
  replica.acquire(&w);
  turn();
  ASSERT_EQ(factory_->made.size(), 1u);
  EXPECT_EQ(&factory_->made[0]->pool(), &replica);
  factory_->made[0]->loginFails("");  // connection refused: no answer from the server
  EXPECT_EQ(log_, std::vector<std::string>{"w moved"});
  Pool& primary = manager_->pool("appdb");
  EXPECT_EQ(w.moved_to, &primary);
  EXPECT_FALSE(health_.snapshot()[1].up);
  EXPECT_EQ(manager_->pool("appdb", false, false, true).host(), 0u) << "out of the rotation";
  turn();
  ASSERT_EQ(factory_->made.size(), 2u);
  EXPECT_EQ(&factory_->made[1]->pool(), &primary);
  factory_->made[1]->loginSucceeds();
  turn();
  EXPECT_EQ(log_, (std::vector<std::string>{"w moved", "w ready 2"}));
  EXPECT_TRUE(w.failed_sqlstate.empty());
  factory_->closesComplete();
}

TEST_F(ReplicaPoolTest, AMissingDatabaseOnAReplicaIsTheClientsAnswerNotAFailover) {
  test::RecordingWaiter w("w", log_);
  manager_->pool("appdb", false, false, true).acquire(&w);
  turn();
  factory_->made[0]->loginFails("3D000");
  EXPECT_EQ(w.failed_sqlstate, "3D000");
  EXPECT_TRUE(health_.snapshot()[1].up);
  factory_->closesComplete();
}

}  // namespace
