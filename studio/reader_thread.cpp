// The reader thread and its hand-back to the loop.
#include "studio/reader_thread.h"

#include <spdlog/spdlog.h>

namespace pgwarden::studio {

std::shared_ptr<ReaderThread> ReaderThread::start(uv_loop_t* loop, Opener opener,
                                                  size_t max_queue) {
  std::shared_ptr<ReaderThread> t(new ReaderThread(std::move(opener), max_queue));
  t->async_ = new uv_async_t{};
  uv_async_init(loop, t->async_, &ReaderThread::onAsync);
  t->async_->data = t.get();
  t->thread_ = std::thread([raw = t.get()] { raw->run(); });
  return t;
}

ReaderThread::ReaderThread(Opener opener, size_t max_queue)
    : opener_(std::move(opener)), max_queue_(max_queue) {}

ReaderThread::~ReaderThread() { stop(); }

bool ReaderThread::submit(ReadJob job, ReadDone done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || pending_.size() >= max_queue_) return false;
    pending_.push_back(Item{std::move(job), std::move(done), {}});
  }
  cv_.notify_one();
  return true;
}

size_t ReaderThread::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

void ReaderThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    pending_.clear();
  }
  cv_.notify_one();
  // An interrupt that comes just before a query starts is lost: repeat it until the thread ends.
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (!ended_ && thread_.joinable()) {
      if (reading_ != nullptr) reading_->interrupt();
      ended_cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
  }
  if (thread_.joinable()) thread_.join();
  finished_.clear();
  if (async_ != nullptr) {
    async_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(async_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
    async_ = nullptr;
  }
}

void ReaderThread::run() {
  struct Ended {
    ReaderThread* t;
    ~Ended() {
      std::lock_guard<std::mutex> lock(t->mu_);
      t->ended_ = true;
      t->ended_cv_.notify_all();
    }
  } ended{this};
  std::unique_ptr<history::ReportReader> reader;
  std::string error;
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (stopping_) return;
      item = std::move(pending_.front());
      pending_.pop_front();
    }
    if (!reader) {
      auto opened = opener_();
      if (opened.ok()) {
        reader = std::move(*opened);
        error.clear();
      } else {
        error = opened.error();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      reading_ = reader.get();
    }
    // The job is the studio's code: nothing it throws may end the thread (and the process).
    try {
      item.answer = item.job(reader.get(), error);
    } catch (const std::exception& e) {
      spdlog::error("studio: a page failed: {}", e.what());
      item.answer = net::HttpResponse{};
      item.answer.status = 500;
      item.answer.content_type = "text/plain; charset=utf-8";
      item.answer.body = "internal error\n";
    }
    item.job = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = nullptr;  // before the reader may go: stop() interrupts through it
    }
    // A failed query may mean a lost connection: open the store again for the next page.
    if (item.answer.status >= 500) reader.reset();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      finished_.push_back(std::move(item));
      uv_async_send(async_);
    }
  }
}

void ReaderThread::onAsync(uv_async_t* handle) {
  if (handle->data != nullptr) static_cast<ReaderThread*>(handle->data)->deliver();
}

void ReaderThread::deliver() {
  std::deque<Item> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready.swap(finished_);
  }
  for (auto& item : ready) item.done(std::move(item.answer));
}

}  // namespace pgwarden::studio
