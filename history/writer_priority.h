// The history writer's share of the CPU. Records wait for the writer in the spool, which survives
// the process, so the writer need not compete for a core with the event loop, PostgreSQL and the
// clients on the same host: while it keeps up it runs in the background (SCHED_BATCH at nice 19:
// it never preempts another thread on waking and gets about 1.5% of a core against one busy
// thread of nice 0, so it always progresses), and when records pile up the loop puts it back
// under the normal policy until it has drained them, so a busy host never fills the spool because
// of it. docs/history.md, "The writer's priority".
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace pgwarden::history {

// When the writer is promoted (either mark reached) and when it goes back (both below).
struct PriorityMarks {
  size_t promote_records = 0;
  uint64_t promote_bytes = 0;
  size_t demote_records = 0;
  uint64_t demote_bytes = 0;
};

// The marks for a queue of `queue_size` records and a spool of `capacity` bytes: promoted at an
// eighth of either (at most 8,192 records), back at a quarter of that.
PriorityMarks priorityMarks(size_t queue_size, uint64_t capacity);

// The background: SCHED_BATCH at this nice value.
inline constexpr int kBackgroundNice = 19;

// Whether a thread of this process that enters the background may leave it again (RLIMIT_NICE
// up to the process's nice value, or CAP_SYS_NICE): a short-lived thread tries both ways. On
// false, `why` says what refused.
bool canLeaveBackground(std::string* why);

// One writer thread's policy. enter() runs on the writer; afterPush() on the producer and
// beforeWait() on the writer, both under the recorder's lock, which orders the changes.
class WriterPriority {
 public:
  explicit WriterPriority(PriorityMarks marks) : marks_(marks) {}
  WriterPriority(const WriterPriority&) = delete;
  WriterPriority& operator=(const WriterPriority&) = delete;

  // Writer thread: enters the background. False (the thread stays as it was) when the system
  // refuses, with the reason in `why`. Call only when canLeaveBackground() held.
  bool enter(std::string* why);

  // Producer: the backlog after a push. Promotes the writer at the marks.
  void afterPush(size_t ready, uint64_t used_bytes) {
    if (background_ && (ready >= marks_.promote_records || used_bytes >= marks_.promote_bytes)) {
      promote();
    }
  }
  // Writer, before it waits for records: back to the background when the backlog is under both
  // low marks (and finish() was not called).
  void beforeWait(size_t ready, uint64_t used_bytes);
  // Under the normal policy for good (the writer drains at shutdown at full speed); a later
  // enter() refuses.
  void finish();

  // Any thread.
  bool background() const { return state_.load(std::memory_order_relaxed) == kBackground; }
  uint64_t promotions() const { return promotions_.load(std::memory_order_relaxed); }

 private:
  enum State : int { kNormal, kBackground, kPromoted, kFinished };
  void promote();

  const PriorityMarks marks_;
  pid_t writer_ = 0;         // the writer's thread id
  int normal_nice_ = 0;      // its nice value before it entered the background
  bool background_ = false;  // under the lock: the writer is in the background now
  std::atomic<int> state_{kNormal};
  std::atomic<uint64_t> promotions_{0};
};

}  // namespace pgwarden::history
