// studio: the reader thread runs jobs off the loop and hands their answers back on the loop
// thread, in order; a full queue refuses at once; a store that cannot be opened reaches the job
// as an error; stop() drops what is waiting.
#include "studio/reader_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "history/recorder.h"
#include "history/test_util.h"

namespace pgwarden::studio {
namespace {

using net::HttpResponse;

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

TEST(ReaderThread, StopInterruptsTheQueryRunningNow) {
  history::test::TempDir dir;
  history::HistoryConfig c;
  c.store = "sqlite";
  c.path = dir.file("history.db");
  auto rec = history::makeRecorder(c);
  ASSERT_TRUE(rec->submit(history::test::makeRecord(1, "SELECT 1")));
  rec->shutdown(std::chrono::seconds(5));
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto t = ReaderThread::start(
      &loop, [path = c.path] { return history::openReportReader("sqlite", path); }, 2);
  std::atomic<bool> running{false};
  std::string outcome;
  ASSERT_TRUE(t->submit(
      [&](history::ReportReader* reader, const std::string& error) {
        EXPECT_NE(reader, nullptr) << error;
        running = true;
        // Never ends on its own.
        auto r = reader->query(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM "
            "c",
            {});
        outcome = r.ok() ? "finished" : r.error();
        return HttpResponse{};
      },
      [](HttpResponse) { ADD_FAILURE() << "no answer after stop()"; }));
  while (!running) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  t->stop();  // returns only once the thread has ended
  EXPECT_EQ(outcome, "interrupted");
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace pgwarden::studio
