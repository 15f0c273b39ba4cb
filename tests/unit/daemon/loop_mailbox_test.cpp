// LoopMailbox: tasks posted from other threads run on the loop's thread, in the order posted,
// each once; a task may post again; a closed mailbox refuses and runs what it still held.
#include "daemon/loop_mailbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using pgwarden::daemon::LoopMailbox;

TEST(LoopMailbox, TasksFromOtherThreadsRunOnTheLoopInOrder) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  LoopMailbox box;
  ASSERT_EQ(box.open(&loop), 0);
  const auto loop_thread = std::this_thread::get_id();
  std::vector<int> seen;  // touched on the loop thread only
  bool wrong_thread = false;
  constexpr int kPerThread = 2000;
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        ASSERT_TRUE(box.post([&, t, i] {
          if (std::this_thread::get_id() != loop_thread) wrong_thread = true;
          seen.push_back(t * kPerThread + i);
        }));
      }
    });
  }
  for (auto& p : posters) p.join();
  // The last task closes the mailbox, so the loop ends once everything ran.
  ASSERT_TRUE(box.post([&] { box.close(); }));
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_FALSE(wrong_thread);
  ASSERT_EQ(seen.size(), 4u * kPerThread);
  // Each poster's tasks in its own order.
  std::vector<int> next(4, 0);
  for (int v : seen) {
    const int t = v / kPerThread;
    EXPECT_EQ(v % kPerThread, next[t]++);
  }
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(LoopMailbox, ATaskThatClosesTheMailboxLetsTheQueuedOnesRunFirst) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  LoopMailbox box;
  ASSERT_EQ(box.open(&loop), 0);
  std::vector<int> seen;
  ASSERT_TRUE(box.post([&] {
    // Queued behind this task while it runs: close() runs them before the handle goes.
    ASSERT_TRUE(box.post([&] { seen.push_back(2); }));
    ASSERT_TRUE(box.post([&] { seen.push_back(3); }));
    seen.push_back(1);
    box.close();
    seen.push_back(4);
  }));
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(LoopMailbox, ATaskMayPostAgainAndAClosedMailboxRefuses) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  LoopMailbox box;
  ASSERT_EQ(box.open(&loop), 0);
  int runs = 0;
  std::function<void()> again = [&] {
    if (++runs < 5) {
      ASSERT_TRUE(box.post(again));
    } else {
      box.close();
    }
  };
  ASSERT_TRUE(box.post(again));
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(runs, 5);
  EXPECT_FALSE(box.post([&] { ++runs; }));
  EXPECT_EQ(runs, 5);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}
