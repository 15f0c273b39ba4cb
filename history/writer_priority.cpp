// The history writer between the background (SCHED_BATCH, nice 19) and the normal policy at the
// nice value it had, in one sched_setattr(2) call that takes another thread's id: the producer
// can promote a writer that gets too little CPU to promote itself soon.
#include "history/writer_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace pgwarden::history {

namespace {

constexpr size_t kMaxPromoteRecords = 8192;

// The kernel's struct sched_attr, first version (linux/sched/types.h, whose sched_param clashes
// with glibc's). glibc 2.36 has no sched_setattr wrapper.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(SchedAttr) == 48, "SCHED_ATTR_SIZE_VER0");

// 0, or the errno of the refusal.
int setPolicy(pid_t tid, bool background, int normal_nice) {
  SchedAttr attr{};
  attr.size = sizeof(attr);
  attr.sched_policy = background ? SCHED_BATCH : SCHED_OTHER;
  attr.sched_nice = background ? kBackgroundNice : normal_nice;
  return syscall(SYS_sched_setattr, tid, &attr, 0) == 0 ? 0 : errno;
}

// The calling thread's nice value (getpriority's -1 is a value, told apart by errno).
int ownNice() {
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  return errno == 0 ? nice : 0;
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
    const int nice = ownNice();
    entered = setPolicy(gettid(), true, nice);
    if (entered == 0) left = setPolicy(gettid(), false, nice);
  });
  probe.join();
  if (entered != 0) {
    *why = std::string("cannot enter SCHED_BATCH at nice 19: ") + std::strerror(entered);
    return false;
  }
  if (left != 0) {
    *why = std::string("cannot come back from nice 19 (RLIMIT_NICE too low, no CAP_SYS_NICE): ") +
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
  writer_ = gettid();
  normal_nice_ = ownNice();
  if (const int rc = setPolicy(writer_, true, normal_nice_); rc != 0) {
    *why = std::string("cannot enter SCHED_BATCH at nice 19: ") + std::strerror(rc);
    return false;
  }
  background_ = true;
  state_.store(kBackground, std::memory_order_relaxed);
  return true;
}

void WriterPriority::promote() {
  // A failure leaves the writer where it was; the next push tries again.
  if (setPolicy(writer_, false, normal_nice_) != 0) return;
  background_ = false;
  state_.store(kPromoted, std::memory_order_relaxed);
  promotions_.fetch_add(1, std::memory_order_relaxed);
}

void WriterPriority::beforeWait(size_t ready, uint64_t used_bytes) {
  if (state_.load(std::memory_order_relaxed) != kPromoted) return;
  if (ready > marks_.demote_records || used_bytes > marks_.demote_bytes) return;
  if (setPolicy(writer_, true, normal_nice_) != 0) return;
  background_ = true;
  state_.store(kBackground, std::memory_order_relaxed);
}

void WriterPriority::finish() {
  if (background_ && setPolicy(writer_, false, normal_nice_) != 0) return;
  background_ = false;
  state_.store(kFinished, std::memory_order_relaxed);
}

}  // namespace pgwarden::history
