// The history writer between SCHED_IDLE and the normal policy. pthread_setschedparam takes another
// thread's handle, so the producer can promote a writer that gets no CPU to promote itself.
#include "history/writer_priority.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace pgwarden::history {

namespace {

constexpr size_t kMaxPromoteRecords = 8192;

int setPolicy(pthread_t thread, int policy) {
  sched_param param{};
  param.sched_priority = 0;
  return pthread_setschedparam(thread, policy, &param);
}

}  // namespace

PriorityMarks priorityMarks(size_t queue_size, uint64_t capacity) {
  PriorityMarks m;
  m.promote_records = std::max<size_t>(1, std::min(queue_size / 8, kMaxPromoteRecords));
  m.promote_bytes = std::max<uint64_t>(1, capacity / 8);
  m.demote_records = m.promote_records / 4;
  m.demote_bytes = m.promote_bytes / 4;
  return m;
}

bool canLeaveBackground(std::string* why) {
  int entered = -1;
  int left = -1;
  std::thread probe([&] {
    entered = setPolicy(pthread_self(), SCHED_IDLE);
    if (entered == 0) left = setPolicy(pthread_self(), SCHED_OTHER);
  });
  probe.join();
  if (entered != 0) {
    *why = std::string("cannot enter SCHED_IDLE: ") + std::strerror(entered);
    return false;
  }
  if (left != 0) {
    *why = std::string("cannot leave SCHED_IDLE (RLIMIT_NICE below 20, no CAP_SYS_NICE): ") +
           std::strerror(left);
    return false;
  }
  return true;
}

bool WriterPriority::enter(std::string* why) {
  if (state_.load(std::memory_order_relaxed) == kFinished) {
    *why = "the recorder is shutting down";
    return false;
  }
  writer_ = pthread_self();
  if (const int rc = setPolicy(writer_, SCHED_IDLE); rc != 0) {
    *why = std::string("cannot enter SCHED_IDLE: ") + std::strerror(rc);
    return false;
  }
  background_ = true;
  state_.store(kBackground, std::memory_order_relaxed);
  return true;
}

bool WriterPriority::set(int policy) { return setPolicy(writer_, policy) == 0; }

void WriterPriority::promote() {
  // A failure leaves the writer where it was; the next push tries again.
  if (!set(SCHED_OTHER)) return;
  background_ = false;
  state_.store(kPromoted, std::memory_order_relaxed);
  promotions_.fetch_add(1, std::memory_order_relaxed);
}

void WriterPriority::beforeWait(size_t ready, uint64_t used_bytes) {
  if (state_.load(std::memory_order_relaxed) != kPromoted) return;
  if (ready > marks_.demote_records || used_bytes > marks_.demote_bytes) return;
  if (!set(SCHED_IDLE)) return;
  background_ = true;
  state_.store(kBackground, std::memory_order_relaxed);
}

void WriterPriority::finish() {
  if (background_ && !set(SCHED_OTHER)) return;
  background_ = false;
  state_.store(kFinished, std::memory_order_relaxed);
}

}  // namespace pgwarden::history
