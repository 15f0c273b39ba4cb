// The studio's one reader thread: store queries never run on the event loop. A job runs on the
// thread with the open store (opened on first use, and again after a failure) and makes the
// answer there; the answer is handed back on the loop through a uv_async. The queue is bounded:
// a full queue refuses the job at once (the page answers 503).
#pragma once

#include <uv.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "history/report_reader.h"
#include "net/http_transport.h"

namespace pgwarden::studio {

// Runs on the reader thread; `reader` is null when the store could not be opened (`error` says
// why).
using ReadJob =
    std::function<net::HttpResponse(history::ReportReader* reader, const std::string& error)>;
// Runs on the loop with the job's answer.
using ReadDone = std::function<void(net::HttpResponse)>;

class ReaderThread {
 public:
  // `opener` opens the store (on the reader thread).
  using Opener = std::function<Result<std::unique_ptr<history::ReportReader>>()>;
  static std::shared_ptr<ReaderThread> start(uv_loop_t* loop, Opener opener, size_t max_queue);
  ~ReaderThread();
  ReaderThread(const ReaderThread&) = delete;
  ReaderThread& operator=(const ReaderThread&) = delete;

  // Loop thread. False when the queue is full or the thread is stopping.
  [[nodiscard]] bool submit(ReadJob job, ReadDone done);
  // Loop thread: no `done` runs after it; the query running now is interrupted and the thread
  // joined. Safe to call twice.
  void stop();
  size_t queued() const;

 private:
  ReaderThread(Opener opener, size_t max_queue);
  void run();
  static void onAsync(uv_async_t* handle);
  void deliver();

  struct Item {
    ReadJob job;
    ReadDone done;
    net::HttpResponse answer;
  };
  Opener opener_;
  const size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> pending_;   // waiting for the thread
  std::deque<Item> finished_;  // answered, waiting for the loop
  bool stopping_ = false;
  bool ended_ = false;  // run() has returned
  std::condition_variable ended_cv_;
  history::ReportReader* reading_ = nullptr;  // the thread's open store, while a job runs
  std::thread thread_;
  uv_async_t* async_ = nullptr;  // freed by its close callback
};

}  // namespace pgwarden::studio
