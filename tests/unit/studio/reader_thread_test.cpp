// studio: the reader thread runs jobs off the loop and hands their answers back on the loop
// thread, in order; a full queue refuses at once; a store that cannot be opened reaches the job
// as an error; stop() drops what is waiting.
#include "studio/reader_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace pgwarden::studio {
namespace {

using daemon::HttpResponse;

TEST(ReaderThread, AnswersComeBackOnTheLoopThreadInOrder) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto t = ReaderThread::start(
      &loop, [] { return history::openReportReader("sqlite", "/nonexistent/h.db"); }, 4);
  const auto loop_thread = std::this_thread::get_id();
  std::vector<int> got;
  std::vector<std::string> errors;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(t->submit(
        [i, &errors, loop_thread](history::ReportReader* reader, const std::string& error) {
          EXPECT_NE(std::this_thread::get_id(), loop_thread);
          EXPECT_EQ(reader, nullptr);
          errors.push_back(error);
          HttpResponse r;
          r.status = 200 + i;
          return r;
        },
        [&got, loop_thread](HttpResponse r) {
          EXPECT_EQ(std::this_thread::get_id(), loop_thread);
          got.push_back(r.status);
        }));
  }
  while (got.size() < 3) uv_run(&loop, UV_RUN_ONCE);
  EXPECT_EQ(got, (std::vector<int>{200, 201, 202}));
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("no such file"), std::string::npos) << errors[0];
  t->stop();
  t->stop();
  uv_run(&loop, UV_RUN_DEFAULT);  // the async handle's close
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(ReaderThread, AFullQueueRefusesAtOnce) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto t = ReaderThread::start(
      &loop, [] { return history::openReportReader("sqlite", "/nonexistent/h.db"); }, 2);
  std::atomic<bool> release{false};
  auto slow = [&release](history::ReportReader*, const std::string&) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return HttpResponse{};
  };
  int done = 0;
  ASSERT_TRUE(t->submit(slow, [&done](HttpResponse) { ++done; }));
  // The first may already be on the thread: at most two more fit, then the queue is full.
  while (t->queued() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(t->submit(slow, [&done](HttpResponse) { ++done; }));
  EXPECT_TRUE(t->submit(slow, [&done](HttpResponse) { ++done; }));
  EXPECT_FALSE(t->submit(slow, [&done](HttpResponse) { ++done; }));
  release = true;
  while (done < 3) uv_run(&loop, UV_RUN_ONCE);
  t->stop();
  EXPECT_FALSE(t->submit(slow, [&done](HttpResponse) { ++done; }));
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace pgwarden::studio
