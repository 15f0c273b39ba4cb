// Work handed to a loop from any thread: a mutex-guarded queue of callables and a uv_async handle
// that wakes the loop to run them, in the order they were posted, on the loop's own thread. How
// the acceptor hands a socket to a worker loop, and how loops ask each other for anything (a
// cancel, a reload, the rows of the admin console) without sharing what they own.
#pragma once

#include <uv.h>

#include <functional>
#include <mutex>
#include <vector>

namespace pgwarden::daemon {

class LoopMailbox {
 public:
  using Task = std::function<void()>;
  LoopMailbox() = default;
  ~LoopMailbox();
  LoopMailbox(const LoopMailbox&) = delete;
  LoopMailbox& operator=(const LoopMailbox&) = delete;

  // On the loop's thread, before anything is posted.
  int open(uv_loop_t* loop);
  // Any thread. False once the mailbox is closed: the task is dropped (the caller cleans up).
  bool post(Task task);
  // On the loop's thread: no more tasks; those still queued run first. The handle is closed;
  // the loop ends once its close callback has run.
  void close();
  bool isOpen() const { return handle_ != nullptr; }

 private:
  static void onAsync(uv_async_t* h);
  void drain();

  std::mutex mu_;
  std::vector<Task> queue_;
  bool closed_ = false;
  uv_async_t* handle_ = nullptr;
};

}  // namespace pgwarden::daemon
