// RingQueue: order under pushes at both ends and inserts, growth across the ring's wrap, moves of
// move-only elements, and the ring given back by release() only when empty.
#include "common/ring_queue.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace pgwarden {
namespace {

std::vector<int> contents(const RingQueue<std::unique_ptr<int>>& q) {
  std::vector<int> out;
  for (const auto& p : q) out.push_back(*p);
  return out;
}

TEST(RingQueueTest, AllocatesNothingUntilTheFirstPush) {
  RingQueue<std::string> q;
  EXPECT_EQ(q.capacity(), 0u);
  EXPECT_TRUE(q.empty());
  q.push_back("a");
  EXPECT_EQ(q.capacity(), 4u);
  EXPECT_EQ(q.front(), "a");
}

TEST(RingQueueTest, KeepsOrderAcrossTheWrapAndGrowth) {
  RingQueue<std::unique_ptr<int>> q;
  for (int i = 0; i < 3; ++i) q.push_back(std::make_unique<int>(i));
  q.pop_front();
  q.pop_front();
  // The head sits at slot 2 now: these wrap, then the sixth push grows the ring.
  for (int i = 3; i < 9; ++i) q.push_back(std::make_unique<int>(i));
  EXPECT_EQ(contents(q), (std::vector<int>{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(q.capacity(), 8u);
  q.push_front(std::make_unique<int>(1));
  EXPECT_EQ(*q.front(), 1);
  EXPECT_EQ(*q.back(), 8);
}

TEST(RingQueueTest, InsertsBeforeAPosition) {
  RingQueue<std::unique_ptr<int>> q;
  q.insert(0, std::make_unique<int>(3));  // into an empty queue
  q.insert(0, std::make_unique<int>(1));
  q.insert(1, std::make_unique<int>(2));
  q.insert(q.size(), std::make_unique<int>(5));
  q.insert(q.size() - 1, std::make_unique<int>(4));
  EXPECT_EQ(contents(q), (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(RingQueueTest, MatchesADequeUnderRandomOperations) {
  std::mt19937 rng(7);
  RingQueue<std::string> q;
  std::deque<std::string> want;
  for (int step = 0; step < 20000; ++step) {
    const int op = int(rng() % 5);
    const std::string v = std::to_string(step);
    if (op == 0) {
      q.push_back(v);
      want.push_back(v);
    } else if (op == 1) {
      q.push_front(v);
      want.push_front(v);
    } else if (op == 2) {
      const size_t pos = want.empty() ? 0 : rng() % (want.size() + 1);
      q.insert(pos, v);
      want.insert(want.begin() + long(pos), v);
    } else if (!want.empty()) {
      q.pop_front();
      want.pop_front();
    }
    ASSERT_EQ(q.size(), want.size());
    if (!want.empty()) {
      ASSERT_EQ(q.front(), want.front());
      ASSERT_EQ(q.back(), want.back());
    }
  }
  size_t i = 0;
  for (const auto& s : q) EXPECT_EQ(s, want[i++]);
}

TEST(RingQueueTest, ReleaseGivesTheRingBackOnlyWhenEmpty) {
  RingQueue<std::string> q;
  q.push_back("x");
  q.release();
  EXPECT_EQ(q.capacity(), 4u);  // still holds an element
  q.clear();
  q.release();
  EXPECT_EQ(q.capacity(), 0u);
  q.push_back("y");  // usable again
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.front(), "y");
}

TEST(RingQueueTest, MovesTheRingAndItsElements) {
  RingQueue<std::unique_ptr<int>> a;
  a.push_back(std::make_unique<int>(1));
  a.push_back(std::make_unique<int>(2));
  RingQueue<std::unique_ptr<int>> b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(contents(b), (std::vector<int>{1, 2}));
  RingQueue<std::unique_ptr<int>> c;
  c.push_back(std::make_unique<int>(9));
  c = std::move(b);
  EXPECT_EQ(contents(c), (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace pgwarden
