// Read replicas: which host a read goes to after the health checks (up, in recovery, lag under
// max_replica_lag, in turn), a host a loop found unreachable leaving until a check finds it back,
// and a replica's pool handing its waiting clients to the primary's when its login finds nobody.
#include "pool/host_health.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fake_connection.h"
#include "pool/pool.h"

using namespace pgwarden::daemon;
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
