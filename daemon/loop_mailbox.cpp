// LoopMailbox: post() appends under the lock and wakes the loop; the loop swaps the queue out
// and runs the batch without the lock, so a task may post again (to any loop, itself included)
// or close the mailbox.
#include "daemon/loop_mailbox.h"

namespace pgwarden::daemon {

LoopMailbox::~LoopMailbox() {
  // A mailbox whose loop never ran it closed: the handle is freed by libuv's close callback only
  // if the loop runs again; the daemon closes every mailbox before its loop ends.
  if (handle_) close();
}

int LoopMailbox::open(uv_loop_t* loop) {
  handle_ = new uv_async_t{};
  const int rc = uv_async_init(loop, handle_, &LoopMailbox::onAsync);
  if (rc != 0) {
    delete handle_;
    handle_ = nullptr;
    return rc;
  }
  handle_->data = this;
  return 0;
}

bool LoopMailbox::post(Task task) {
  {
    std::lock_guard lock(mu_);
    if (closed_ || !handle_) return false;
    queue_.push_back(std::move(task));
    // uv_async_send coalesces: one wake-up for however many tasks arrive before the loop runs.
    uv_async_send(handle_);
  }
  return true;
}

void LoopMailbox::drain() {
  // A local batch: a task may close the mailbox, which drains again from inside this loop.
  std::vector<Task> batch;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) return;
      batch.swap(queue_);
    }
    for (auto& t : batch) t();
    batch.clear();
  }
}

void LoopMailbox::close() {
  if (!handle_) return;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  drain();
  uv_async_t* h = handle_;
  handle_ = nullptr;
  h->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(h),
           [](uv_handle_t* x) { delete reinterpret_cast<uv_async_t*>(x); });
}

void LoopMailbox::onAsync(uv_async_t* h) {
  if (auto* self = static_cast<LoopMailbox*>(h->data)) self->drain();
}

}  // namespace pgwarden::daemon
