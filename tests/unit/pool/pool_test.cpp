// The pool's rules on a real uv loop with fake connections and a clock the test moves: handoffs
// on the next loop turn, waiters in order, the acquire timeout, min_size, idle closes, and what a
// failed login does to the clients waiting; and two loops' pools sharing one connection cap.
#include "pool/pool.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "fake_connection.h"
#include "pool/connection_slots.h"
#include "pool/server_conn.h"

using namespace pgwarden::daemon;
using namespace pgwarden::pool;
using pgwarden::daemon::test::FakeConnection;
using pgwarden::daemon::test::FakeFactory;

namespace {

using Waiter = pgwarden::daemon::test::RecordingWaiter;

class PoolTest : public ::testing::Test {
 protected:
  PoolTest() {
    uv_loop_init(&loop_);
    auto factory = std::make_unique<FakeFactory>();
    factory_ = factory.get();
    manager_ = std::make_unique<PoolManager>(&loop_, counters_, std::move(factory),
                                             [this] { return now_; });
    config_ = test::poolSettings();
    apply();
  }

  ~PoolTest() override {
    manager_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);  // close callbacks of the manager's handles
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  void apply() { manager_->setConfig(config_); }
  Pool& pool() { return manager_->pool("appdb"); }
  // One turn of the loop: whatever the pool scheduled runs now.
  void turn() { uv_run(&loop_, UV_RUN_NOWAIT); }
  FakeConnection& made(size_t i) {
    EXPECT_LT(i, factory_->made.size());
    return *factory_->made.at(i);
  }
  size_t madeCount() const { return factory_->made.size(); }
  void closesComplete() { factory_->closesComplete(); }

  uv_loop_t loop_{};
  pgwarden::metrics::Counters counters_;
  uint64_t now_ = 1000000;
  FakeFactory* factory_ = nullptr;
  std::shared_ptr<PoolSettings> config_;
  std::unique_ptr<PoolManager> manager_;
  std::vector<std::string> log_;
};

TEST_F(PoolTest, AnIdleConnectionIsHandedOverOnTheNextLoopTurnNotInsideAcquire) {
  config_->pool.min_size = 1;
  apply();
  pool().tick(now_);
  ASSERT_EQ(madeCount(), 1u);
  made(0).loginSucceeds();
  turn();
  ASSERT_EQ(pool().stats().idle, 1);

  Waiter w("w", log_);
  pool().acquire(&w);
  EXPECT_EQ(w.conn, nullptr) << "acquire called the waiter back from inside the call";
  EXPECT_TRUE(log_.empty());
  turn();
  EXPECT_EQ(w.conn, &made(0));
  EXPECT_EQ(log_, std::vector<std::string>{"w ready 1"});
}

TEST_F(PoolTest, ALoginThatFailsAtOnceIsReportedOnTheNextTurnNotInsideAcquire) {
  factory_->fail_at_start = true;
  Waiter w("w", log_);
  pool().acquire(&w);
  EXPECT_TRUE(log_.empty()) << "acquire failed the waiter from inside the call";
  turn();
  EXPECT_EQ(log_, std::vector<std::string>{"w failed 08006"});
  EXPECT_EQ(w.failed_message, kUnreachableMessage);
}

TEST_F(PoolTest, ANewLoginIsHandedOverOnTheTurnAfterItFinished) {
  Waiter w("w", log_);
  pool().acquire(&w);
  turn();
  ASSERT_EQ(madeCount(), 1u);
  made(0).loginSucceeds();  // from inside the connection's own input processing
  EXPECT_EQ(w.conn, nullptr);
  turn();
  EXPECT_EQ(w.conn, &made(0));
}

TEST_F(PoolTest, WaitersAreServedFirstComeFirstServed) {
  config_->pool.max_size = 1;
  apply();
  Waiter a("a", log_), b("b", log_), c("c", log_);
  pool().acquire(&a);
  pool().acquire(&b);
  pool().acquire(&c);
  turn();
  ASSERT_EQ(madeCount(), 1u) << "max_size is 1";
  made(0).loginSucceeds();
  turn();
  made(0).resetDone();
  turn();
  made(0).resetDone();
  turn();
  EXPECT_EQ(log_, (std::vector<std::string>{"a ready 1", "b ready 1", "c ready 1"}));
  EXPECT_EQ(pool().stats().waiting, 0);
}

TEST_F(PoolTest, AWaiterThatLeftBeforeItsTurnIsNotCalledAndTheConnectionStaysIdle) {
  config_->pool.min_size = 1;
  apply();
  pool().tick(now_);
  made(0).loginSucceeds();
  turn();
  Waiter w("w", log_);
  pool().acquire(&w);
  pool().cancelWait(&w);
  turn();
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(pool().stats().idle, 1);
  EXPECT_EQ(pool().stats().waiting, 0);
}

TEST_F(PoolTest, AWaiterGivesUpAfterAcquireTimeout) {
  config_->pool.max_size = 1;
  apply();
  Waiter holder("holder", log_), late("late", log_);
  pool().acquire(&holder);
  turn();
  made(0).loginSucceeds();
  turn();
  ASSERT_NE(holder.conn, nullptr);

  pool().acquire(&late);
  turn();
  now_ += 4999;
  pool().tick(now_);
  EXPECT_TRUE(late.failed_sqlstate.empty()) << "failed before acquire_timeout";
  now_ += 1;
  pool().tick(now_);
  EXPECT_EQ(late.failed_sqlstate, "53300");
  EXPECT_NE(late.failed_message.find("within 5000 ms (pool size 1)"), std::string::npos)
      << late.failed_message;
  EXPECT_EQ(madeCount(), 1u) << "no connection beyond max_size";
}

TEST_F(PoolTest, MinSizeConnectionsAreOpenedAndKeptWhenIdleForLong) {
  config_->pool.min_size = 2;
  config_->pool.max_size = 4;
  apply();
  pool().tick(now_);
  ASSERT_EQ(madeCount(), 2u);
  made(0).loginSucceeds();
  made(1).loginSucceeds();
  now_ += 10 * 60000;
  pool().tick(now_);
  EXPECT_EQ(made(0).closes() + made(1).closes(), 0);
  EXPECT_EQ(pool().stats().idle, 2);
  EXPECT_EQ(madeCount(), 2u);
}

TEST_F(PoolTest, IdleConnectionsAboveMinSizeCloseAndTheTotalStopsAtMinSize) {
  config_->pool.min_size = 1;
  config_->pool.max_size = 3;
  apply();
  // Three clients at once make three connections; all three come back.
  Waiter a("a", log_), b("b", log_), c("c", log_);
  pool().acquire(&a);
  pool().acquire(&b);
  pool().acquire(&c);
  turn();
  ASSERT_EQ(madeCount(), 3u);
  for (size_t i = 0; i < 3; ++i) made(i).loginSucceeds();
  turn();
  for (size_t i = 0; i < 3; ++i) made(i).resetDone();
  turn();
  ASSERT_EQ(pool().stats().idle, 3);

  now_ += 60000;
  pool().tick(now_);
  closesComplete();
  int closed = 0;
  for (size_t i = 0; i < 3; ++i) closed += made(i).closes();
  EXPECT_EQ(closed, 2) << "idle connections closed below min_size";
  EXPECT_EQ(pool().stats().total, 1);
  EXPECT_EQ(pool().stats().idle, 1);

  // The one left is min_size: kept however long it idles, and nothing is opened in its place.
  now_ += 60000;
  pool().tick(now_);
  EXPECT_EQ(pool().stats().total, 1);
  EXPECT_EQ(madeCount(), 3u);
}

TEST_F(PoolTest, WithNoMinSizeEveryIdleConnectionClosesAndThePoolEmpties) {
  config_->pool.max_size = 2;
  apply();
  Waiter a("a", log_), b("b", log_);
  pool().acquire(&a);
  pool().acquire(&b);
  turn();
  made(0).loginSucceeds();
  made(1).loginSucceeds();
  turn();
  made(0).resetDone();
  made(1).resetDone();
  now_ += 60000;
  pool().tick(now_);
  closesComplete();
  EXPECT_EQ(made(0).closes() + made(1).closes(), 2);
  EXPECT_EQ(pool().stats().total, 0);
  EXPECT_TRUE(pool().empty());
}

TEST_F(PoolTest, AFailedLoginFailsOneWaiterNotEveryWaiterWhileAnotherLoginIsInFlight) {
  Waiter a("a", log_), b("b", log_);
  pool().acquire(&a);
  pool().acquire(&b);
  turn();
  ASSERT_EQ(madeCount(), 2u);
  made(0).loginFails("53300");
  // One waiter is told; the other still has a login coming.
  EXPECT_EQ(log_, std::vector<std::string>{"b failed 53300"});
  EXPECT_EQ(pool().stats().waiting, 1);
  closesComplete();
  made(1).loginSucceeds();
  turn();
  EXPECT_EQ(log_, (std::vector<std::string>{"b failed 53300", "a ready 2"}));
}

TEST_F(PoolTest, AWaiterLeftAfterAFailedLoginGetsTheNextAttemptAfterTheRetryPause) {
  // One connection is lent out; a second client's login fails. That client keeps waiting (the
  // lent connection may come back), and the pool tries a new login once login_retry has passed.
  Waiter holder("holder", log_), w("w", log_);
  pool().acquire(&holder);
  turn();
  made(0).loginSucceeds();
  turn();
  pool().acquire(&w);
  turn();
  ASSERT_EQ(madeCount(), 2u);
  made(1).loginFails("08006");
  closesComplete();
  EXPECT_TRUE(w.failed_sqlstate.empty()) << w.failed_sqlstate;

  now_ += 1999;
  pool().tick(now_);
  EXPECT_EQ(madeCount(), 2u) << "a new login before login_retry passed";
  now_ += 1;
  pool().tick(now_);
  ASSERT_EQ(madeCount(), 3u);
  made(2).loginSucceeds();
  turn();
  EXPECT_EQ(w.conn, &made(2));
}

TEST_F(PoolTest, ALoginRefusedWithNothingElseComingFailsTheWaiterWithTheReason) {
  Waiter w("w", log_);
  pool().acquire(&w);
  turn();
  made(0).loginFails("3D000");
  EXPECT_EQ(w.failed_sqlstate, "3D000");
  EXPECT_EQ(w.failed_message, "database does not exist on the server");
}

// A waiter that needs a ServerConnection, lent something else: a wiring mistake that fails the
// waiter (and closes the connection) instead of handing over the wrong type.
class ServerOnlyWaiter final : public ServerWaiter {
 public:
  void onServerReady(ServerConnection&) override { ready = true; }
  void onWaitMoved(Pool&) override {}
  void onServerFailed(const std::string& sqlstate, const std::string&) override {
    failed_sqlstate = sqlstate;
  }
  bool ready = false;
  std::string failed_sqlstate;
};

TEST_F(PoolTest, AServerWaiterLentAnotherKindOfConnectionFailsInsteadOfMisusingIt) {
  ServerOnlyWaiter w;
  pool().acquire(&w);
  turn();
  made(0).loginSucceeds();
  turn();
  EXPECT_FALSE(w.ready);
  EXPECT_EQ(w.failed_sqlstate, "XX000");
  EXPECT_EQ(made(0).closes(), 1);
}

// The admin console's RECONNECT: an idle connection closes at once, a lent one only when its
// client lets go, and a client that waits afterwards gets a new connection.
TEST_F(PoolTest, ReconnectClosesIdleConnectionsNowAndLentOnesWhenReleased) {
  Waiter a("a", log_), b("b", log_);
  pool().acquire(&a);
  pool().acquire(&b);
  turn();
  ASSERT_EQ(madeCount(), 2u);
  made(0).loginSucceeds();
  made(1).loginSucceeds();
  turn();
  ASSERT_NE(a.conn, nullptr);
  ASSERT_NE(b.conn, nullptr);
  made(0).attach();
  made(1).attach();
  made(1).resetDone();  // b let go: idle
  ASSERT_EQ(pool().stats().idle, 1);

  pool().reconnect();
  EXPECT_EQ(made(1).closes(), 1) << "the idle connection closes at once";
  EXPECT_EQ(made(0).closes(), 0) << "a lent connection is not taken from its client";
  EXPECT_EQ(pool().stats().close_needed, 1);
  EXPECT_TRUE(pool().isCloseNeeded(made(0)));

  made(0).resetDone();  // a let go: closed instead of going back
  EXPECT_EQ(made(0).closes(), 1);
  EXPECT_EQ(pool().stats().close_needed, 0);
  EXPECT_EQ(pool().stats().idle, 0);
  closesComplete();

  Waiter c("c", log_);
  pool().acquire(&c);
  turn();
  ASSERT_EQ(madeCount(), 3u) << "a new connection is opened for the next client";
  made(2).loginSucceeds();
  turn();
  EXPECT_EQ(c.conn, &made(2));
}

// ---- two worker loops' pool managers sharing one ConnectionSlots (on one uv loop here, the wake
// calling onSlotFreed directly as the daemon's posted callback would): pool.max_size caps the sum
// of both, a closed connection's slot goes to the other loop's waiter, an idle connection closes to
// make room for it, and the internal pools stay outside the shared cap ----

using pgwarden::daemon::test::RecordingWaiter;

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
