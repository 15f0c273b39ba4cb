// The cap the worker loops share: the total per key never exceeds max, a refused waiter's loop
// is handed the next freed slot and woken once (outside the lock), demand goes when withdrawn,
// and four threads taking and giving at once never see more than max taken.
#include "pool/connection_slots.h"

#include <gtest/gtest.h>

#include <atomic>
#include <initializer_list>
#include <thread>
#include <vector>

using pgwarden::pool::ConnectionSlots;

namespace {

class ConnectionSlotsTest : public ::testing::Test {
 protected:
  ConnectionSlotsTest() {
    for (int i = 0; i < 3; ++i) {
      loops_[i] = slots_.attach([this, i] {
        ++wakes_[i];
        // Run outside the lock: taking it again here would deadlock.
        seen_taken_ = slots_.taken(key_);
      });
    }
  }

  // Loop 0 holds the only slot (max 1), and the `waiting` loops ask for it in this order.
  void full(std::initializer_list<int> waiting) {
    ASSERT_TRUE(slots_.tryTake(key_, 1, loops_[0]));
    for (int i : waiting) ASSERT_FALSE(slots_.tryTake(key_, 1, loops_[i]));
  }

  ConnectionSlots slots_;
  const ConnectionSlots::Key key_ = ConnectionSlots::key("app", "appdb", false);
  int loops_[3] = {};
  int wakes_[3] = {};
  int seen_taken_ = -1;
};

TEST_F(ConnectionSlotsTest, TheTotalOverLoopsStopsAtMax) {
  EXPECT_TRUE(slots_.tryTake(key_, 2, loops_[0]));
  EXPECT_TRUE(slots_.tryTake(key_, 2, loops_[1]));
  EXPECT_FALSE(slots_.tryTake(key_, 2, loops_[0]));
  EXPECT_FALSE(slots_.tryTake(key_, 2, loops_[1]));
  EXPECT_EQ(slots_.taken(key_), 2);
  EXPECT_EQ(slots_.taken(ConnectionSlots::key("app", "appdb", true)), 0)
      << "the write pool has a cap of its own";
  EXPECT_TRUE(slots_.tryTake(ConnectionSlots::key("app", "other", false), 2, loops_[0]));
}

TEST_F(ConnectionSlotsTest, AFreedSlotIsHandedToTheLoopThatWaitsAndWakesItOnce) {
  full({1});
  EXPECT_TRUE(slots_.othersWant(key_, loops_[0]));
  EXPECT_FALSE(slots_.othersWant(key_, loops_[1])) << "a loop's own demand is not another's";

  slots_.give(key_, loops_[0]);
  EXPECT_EQ(wakes_[1], 1);
  EXPECT_EQ(seen_taken_, 1) << "the handed slot stays counted until its loop takes it";
  EXPECT_FALSE(slots_.othersWant(key_, loops_[0])) << "the demand was answered";
  EXPECT_FALSE(slots_.tryTake(key_, 1, loops_[0], ConnectionSlots::Want::kSpare))
      << "the slot is loop 1's";
  EXPECT_TRUE(slots_.tryTake(key_, 1, loops_[1]));
  EXPECT_EQ(slots_.taken(key_), 1);

  slots_.give(key_, loops_[1]);
  EXPECT_EQ(wakes_[0] + wakes_[1] + wakes_[2], 1) << "nobody waits: no wake";
  EXPECT_EQ(slots_.taken(key_), 0);
  EXPECT_EQ(slots_.keys(), 0u) << "an unused key is forgotten";
}

TEST_F(ConnectionSlotsTest, LoopsAreHandedSlotsInTheOrderTheyAsked) {
  full({2, 1});
  slots_.give(key_, loops_[0]);
  EXPECT_EQ(wakes_[2], 1);
  EXPECT_EQ(wakes_[1], 0);
  EXPECT_TRUE(slots_.othersWant(key_, loops_[0]));
}

TEST_F(ConnectionSlotsTest, ASlotHandedToALoopThatNoLongerWantsGoesOnToTheNext) {
  full({1, 2});
  slots_.give(key_, loops_[0]);
  ASSERT_EQ(wakes_[1], 1);
  slots_.noLongerWants(key_, loops_[1]);
  EXPECT_EQ(wakes_[2], 1);
  EXPECT_TRUE(slots_.tryTake(key_, 1, loops_[2]));
  slots_.noLongerWants(key_, loops_[2]);
  EXPECT_EQ(slots_.taken(key_), 1) << "a slot taken stays taken";
}

TEST_F(ConnectionSlotsTest, AWithdrawnOrSpareDemandIsNoDemand) {
  ASSERT_TRUE(slots_.tryTake(key_, 1, loops_[0]));
  EXPECT_FALSE(slots_.tryTake(key_, 1, loops_[1], ConnectionSlots::Want::kSpare));
  EXPECT_FALSE(slots_.othersWant(key_, loops_[0])) << "min_size asks for what is free only";
  ASSERT_FALSE(slots_.tryTake(key_, 1, loops_[1]));
  slots_.noLongerWants(key_, loops_[1]);
  EXPECT_FALSE(slots_.othersWant(key_, loops_[0]));
  slots_.give(key_, loops_[0]);
  EXPECT_EQ(wakes_[1], 0);
  EXPECT_EQ(slots_.taken(key_), 0);
}

TEST_F(ConnectionSlotsTest, TheGivingLoopsOwnDemandIsLeftToItself) {
  full({0});
  slots_.give(key_, loops_[0]);
  EXPECT_EQ(wakes_[0], 0) << "its own pool serves again after a close";
  EXPECT_TRUE(slots_.tryTake(key_, 1, loops_[0]));
}

TEST_F(ConnectionSlotsTest, OverALoweredCapAFreedSlotIsNotHandedOn) {
  ASSERT_TRUE(slots_.tryTake(key_, 2, loops_[0]));
  ASSERT_TRUE(slots_.tryTake(key_, 2, loops_[0]));
  ASSERT_FALSE(slots_.tryTake(key_, 1, loops_[1]));  // a reload lowered max_size to 1
  slots_.give(key_, loops_[0]);
  EXPECT_EQ(wakes_[1], 0);
  EXPECT_EQ(slots_.taken(key_), 1);
  slots_.give(key_, loops_[0]);
  EXPECT_EQ(wakes_[1], 1);
}

TEST_F(ConnectionSlotsTest, ADetachedLoopIsNeitherWokenNorHandedSlots) {
  full({1, 2});
  slots_.give(key_, loops_[0]);  // handed to loop 1
  slots_.detach(loops_[1]);      // which leaves: the slot goes to loop 2
  EXPECT_EQ(wakes_[2], 1);
  EXPECT_TRUE(slots_.tryTake(key_, 1, loops_[2]));
  slots_.detach(loops_[2]);
  slots_.give(key_, loops_[2]);
  EXPECT_EQ(slots_.taken(key_), 0);
  EXPECT_EQ(slots_.keys(), 0u);
}

TEST(ConnectionSlotsThreads, FourThreadsTakingAndGivingNeverHoldMoreThanMax) {
  constexpr int kMax = 2;
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  ConnectionSlots slots;
  const auto keys = std::vector<ConnectionSlots::Key>{ConnectionSlots::key("app", "a", false),
                                                      ConnectionSlots::key("app", "b", false)};
  std::atomic<int> held[2] = {0, 0};
  std::atomic<int> over{0};
  std::atomic<int> woken{0};
  std::vector<int> loop(kThreads);
  for (int t = 0; t < kThreads; ++t) loop[t] = slots.attach([&woken] { ++woken; });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const int k = (i + t) % 2;
        if (!slots.tryTake(keys[k], kMax, loop[t])) continue;
        if (held[k].fetch_add(1) + 1 > kMax || slots.taken(keys[k]) > kMax) ++over;
        held[k].fetch_sub(1);
        slots.give(keys[k], loop[t]);
      }
      for (const auto& key : keys) slots.noLongerWants(key, loop[t]);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(over.load(), 0);
  EXPECT_EQ(slots.taken(keys[0]) + slots.taken(keys[1]), 0) << "every slot came back";
  EXPECT_EQ(slots.keys(), 0u);
  for (int t = 0; t < kThreads; ++t) slots.detach(loop[t]);
}

}  // namespace
