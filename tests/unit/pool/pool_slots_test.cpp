// Two worker loops' pool managers sharing one ConnectionSlots (on one uv loop here, the wake
// calling onSlotFreed directly as the daemon's posted callback would): pool.max_size caps the
// sum of both, a closed connection's slot goes to the other loop's waiter, an idle connection
// closes to make room for it, and the internal pools stay outside the shared cap.
#include <gtest/gtest.h>
#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "fake_connection.h"
#include "pool/connection_slots.h"
#include "pool/pool.h"

using namespace pgwarden::daemon;
using pgwarden::daemon::test::FakeConnection;
using pgwarden::daemon::test::FakeFactory;
using pgwarden::daemon::test::RecordingWaiter;

namespace {

// One worker loop's manager and the connections its factory made.
struct Side {
  FakeFactory* factory = nullptr;
  std::unique_ptr<PoolManager> manager;
  int loop = -1;
  int wakes = 0;

  Pool& pool() { return manager->pool("appdb"); }
  FakeConnection& made(size_t i) { return *factory->made.at(i); }
  size_t madeCount() const { return factory->made.size(); }
  void closesComplete() { factory->closesComplete(); }
};

class PoolSlotsTest : public ::testing::Test {
 protected:
  PoolSlotsTest() {
    uv_loop_init(&loop_);
    config_ = test::poolSettings();
    for (Side* s : {&a_, &b_}) {
      auto factory = std::make_unique<FakeFactory>();
      s->factory = factory.get();
      s->manager = std::make_unique<PoolManager>(&loop_, counters_, std::move(factory),
                                                 [this] { return now_; });
      s->manager->setConfig(config_);
      s->loop = slots_.attach([s] {
        ++s->wakes;
        s->manager->onSlotFreed();
      });
      s->manager->setSlots(&slots_, s->loop);
    }
  }

  ~PoolSlotsTest() override {
    for (Side* s : {&a_, &b_}) {
      slots_.detach(s->loop);
      s->manager.reset();
    }
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  void turn() { uv_run(&loop_, UV_RUN_NOWAIT); }
  int taken() const { return slots_.taken(ConnectionSlots::key("app", "appdb", false)); }
  bool wanted(const Side& by_other_than) const {
    return slots_.othersWant(ConnectionSlots::key("app", "appdb", false), by_other_than.loop);
  }
  // `side` lends both of its connections to two clients of its own.
  void holdTwo(Side& side, RecordingWaiter& w1, RecordingWaiter& w2) {
    side.pool().acquire(&w1);
    side.pool().acquire(&w2);
    turn();
    ASSERT_EQ(side.madeCount(), 2u);
    side.made(0).loginSucceeds();
    side.made(1).loginSucceeds();
    turn();
    ASSERT_NE(w1.conn, nullptr);
    ASSERT_NE(w2.conn, nullptr);
  }

  uv_loop_t loop_{};
  pgwarden::metrics::Counters counters_;
  uint64_t now_ = 1000000;
  std::shared_ptr<PoolSettings> config_;
  ConnectionSlots slots_;
  Side a_;
  Side b_;
  std::vector<std::string> log_;
};

TEST_F(PoolSlotsTest, TheOtherLoopWaitsWhileOneHoldsTheCapAndGetsTheSlotOfAClosedConnection) {
  RecordingWaiter a1("a1", log_), a2("a2", log_), b1("b1", log_);
  holdTwo(a_, a1, a2);
  b_.pool().acquire(&b1);
  turn();
  EXPECT_EQ(b_.madeCount(), 0u) << "max_size holds over both loops";
  EXPECT_EQ(taken(), 2);
  EXPECT_TRUE(wanted(a_));

  a_.made(0).close("the client left in a transaction");
  EXPECT_EQ(b_.wakes, 0) << "a closing connection still holds its slot";
  a_.closesComplete();
  EXPECT_EQ(b_.wakes, 1);
  EXPECT_EQ(taken(), 2) << "the slot went to the waiting loop, not back to the pool";
  turn();
  ASSERT_EQ(b_.madeCount(), 1u);
  b_.made(0).loginSucceeds();
  turn();
  EXPECT_EQ(b1.conn, &b_.made(0));
  EXPECT_EQ(taken(), 2);
  EXPECT_FALSE(wanted(a_));
}

TEST_F(PoolSlotsTest, AnIdleConnectionOnOneLoopClosesToServeTheOtherLoopsWaiter) {
  RecordingWaiter a1("a1", log_), a2("a2", log_), b1("b1", log_);
  holdTwo(a_, a1, a2);
  a_.made(1).resetDone();  // idle for longest
  now_ += 10;
  a_.made(0).resetDone();
  b_.pool().acquire(&b1);
  turn();
  ASSERT_EQ(b_.madeCount(), 0u);

  a_.pool().tick(now_);
  EXPECT_EQ(a_.made(1).closes(), 1) << "the connection idle for longest makes room";
  EXPECT_EQ(a_.made(0).closes(), 0) << "one per tick, and only what the other loop needs";
  a_.closesComplete();
  turn();
  ASSERT_EQ(b_.madeCount(), 1u);
  b_.made(0).loginSucceeds();
  turn();
  EXPECT_EQ(b1.conn, &b_.made(0));

  a_.pool().tick(now_);
  EXPECT_EQ(a_.made(0).closes(), 0) << "nobody waits any more";
  EXPECT_EQ(a_.pool().stats().idle, 1);
  EXPECT_EQ(taken(), 2);
}

TEST_F(PoolSlotsTest, AWaiterThatLeavesWithdrawsItsLoopsDemand) {
  RecordingWaiter a1("a1", log_), a2("a2", log_), b1("b1", log_);
  holdTwo(a_, a1, a2);
  b_.pool().acquire(&b1);
  turn();
  ASSERT_TRUE(wanted(a_));
  b_.pool().cancelWait(&b1);
  EXPECT_FALSE(wanted(a_));
  a_.made(0).resetDone();
  a_.pool().tick(now_);
  EXPECT_EQ(a_.made(0).closes(), 0) << "an idle connection closed for nobody";
}

TEST_F(PoolSlotsTest, ASlotHandedToALoopWhoseWaiterLeftIsFreeAgain) {
  RecordingWaiter a1("a1", log_), a2("a2", log_), b1("b1", log_), a3("a3", log_);
  holdTwo(a_, a1, a2);
  b_.pool().acquire(&b1);
  turn();
  a_.made(0).close("server went away");
  a_.closesComplete();
  ASSERT_EQ(b_.wakes, 1);
  b_.pool().cancelWait(&b1);  // before B's serve ran
  turn();
  EXPECT_EQ(b_.madeCount(), 0u);
  EXPECT_EQ(taken(), 1);
  a_.pool().acquire(&a3);
  turn();
  EXPECT_EQ(a_.madeCount(), 3u) << "the freed slot is anyone's";
}

TEST_F(PoolSlotsTest, AWaiterOnTheOtherLoopStillTimesOut) {
  RecordingWaiter a1("a1", log_), a2("a2", log_), b1("b1", log_);
  holdTwo(a_, a1, a2);
  b_.pool().acquire(&b1);
  turn();
  now_ += 5000;
  b_.pool().tick(now_);
  EXPECT_EQ(b1.failed_sqlstate, "53300");
  EXPECT_NE(b1.failed_message.find("(pool size 2)"), std::string::npos) << b1.failed_message;
  EXPECT_FALSE(wanted(a_));
}

TEST_F(PoolSlotsTest, MinSizeConnectionsCountInTheCapAndYieldToWaitingClients) {
  config_->pool.min_size = 2;
  a_.pool().tick(now_);
  ASSERT_EQ(a_.madeCount(), 2u);
  a_.made(0).loginSucceeds();
  a_.made(1).loginSucceeds();
  b_.pool().tick(now_);
  EXPECT_EQ(b_.madeCount(), 0u) << "min_size opens only what the shared cap leaves";
  EXPECT_FALSE(wanted(a_)) << "a minimum is no client waiting";
  a_.pool().tick(now_);
  EXPECT_EQ(a_.made(0).closes() + a_.made(1).closes(), 0);

  RecordingWaiter b1("b1", log_);
  b_.pool().acquire(&b1);
  turn();
  a_.pool().tick(now_);
  EXPECT_EQ(a_.made(0).closes() + a_.made(1).closes(), 1);
  a_.closesComplete();
  turn();
  ASSERT_EQ(b_.madeCount(), 1u);
  b_.made(0).loginSucceeds();
  turn();
  ASSERT_EQ(b1.conn, &b_.made(0));
  b_.made(0).resetDone();

  // Neither loop's minimum takes the other's connection: nothing moves any more.
  for (int i = 0; i < 3; ++i) {
    now_ += 100;
    a_.pool().tick(now_);
    b_.pool().tick(now_);
  }
  EXPECT_EQ(a_.madeCount(), 2u);
  EXPECT_EQ(b_.made(0).closes(), 0);
  EXPECT_EQ(taken(), 2);
}

TEST_F(PoolSlotsTest, TheInternalPoolsStayOutsideTheSharedCap) {
  RecordingWaiter a1("a1", log_), a2("a2", log_), internal("internal", log_);
  holdTwo(a_, a1, a2);
  a_.manager->pool("appdb", true).acquire(&internal);
  turn();
  ASSERT_EQ(a_.madeCount(), 3u);
  a_.made(2).loginSucceeds();
  turn();
  EXPECT_EQ(internal.conn, &a_.made(2));
  EXPECT_EQ(taken(), 2);
  internal.conn->close("done");
  a_.closesComplete();
  EXPECT_EQ(taken(), 2) << "a connection that took no slot gives none back";
}

TEST_F(PoolSlotsTest, ALoginThatFailsGivesItsSlotBackOnce) {
  a_.factory->fail_at_start = true;
  RecordingWaiter a1("a1", log_);
  a_.pool().acquire(&a1);
  turn();
  EXPECT_EQ(a1.failed_sqlstate, "08006");
  EXPECT_EQ(taken(), 0);

  a_.factory->fail_at_start = false;
  now_ += 2000;
  RecordingWaiter a2("a2", log_);
  a_.pool().acquire(&a2);
  turn();
  ASSERT_EQ(a_.madeCount(), 2u);
  EXPECT_EQ(taken(), 1);
  a_.made(1).loginFails("08006");
  EXPECT_EQ(taken(), 1) << "given back when the socket is gone";
  a_.closesComplete();
  a_.closesComplete();
  EXPECT_EQ(taken(), 0);
}

}  // namespace
