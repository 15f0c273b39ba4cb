// The queue between the event loop and the history writer: one producer (the loop's submit) and
// one consumer (the writer thread). A record stays in the queue, and counts against its bounds,
// from push until the writer releases it after the store took it (or refused it for good).
// Two kinds: in memory (history.durability: off) and the memory-mapped spool (process).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "history/record.h"

namespace pgwarden::history {

class RecordQueue {
 public:
  virtual ~RecordQueue() = default;

  // Producer. Constant time, no I/O, never blocks on the consumer. False when the record does
  // not fit (queue_size records, or the byte bound); the caller counts the drop.
  virtual bool push(Record&& r) = 0;
  // The same for a view: the spool encodes it in place and writes the record's id into `v`;
  // the memory queue makes a Record of it.
  virtual bool pushView(RecordView& v) = 0;

  // Consumer: puts in out[0, n) up to `max` records that follow those already taken, oldest
  // first, and returns n. `out` grows when it holds fewer than n; the records already in it are
  // overwritten, their strings' storage reused (a writer that keeps its batch allocates nothing
  // per record), and those from n on are left as they are. Taken records stay in the queue
  // until released.
  virtual size_t take(std::vector<Record>& out, size_t max) = 0;
  // Consumer: the oldest `n` taken records are resolved (stored, or refused by the store).
  virtual void release(size_t n) = 0;
  // Consumer, when shutdown's deadline passed with the store down: gives up on what is left.
  // Returns how many records are lost by that (the memory queue: all of them; the spool keeps
  // them for the next start, so none).
  virtual size_t abandon() = 0;

  // Any thread: records pushed (or recovered) and not released.
  virtual size_t depth() const = 0;
  // Any thread: records pushed and not yet taken (what the writer waits for).
  virtual size_t ready() const = 0;
};

// history.durability: off. Bounded by `max_records` and `max_bytes` (an estimate of the memory a
// queued record holds).
std::unique_ptr<RecordQueue> makeMemoryQueue(size_t max_records, size_t max_bytes);

}  // namespace pgwarden::history
