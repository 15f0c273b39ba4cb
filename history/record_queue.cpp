// The in-memory record queue (history.durability: off): a deque under a mutex, bounded in records
// and in an estimate of the bytes they hold. What it holds is lost if the process dies.
#include "history/record_queue.h"

#include <algorithm>
#include <deque>
#include <mutex>

namespace pgwarden::history {

namespace {

// Memory a queued record holds, near enough to bound the queue in bytes as well as records.
size_t approxBytes(const Record& r) {
  size_t n = sizeof(Record) + r.sql_text.capacity() + r.error_message.capacity() +
             r.guard_actions.capacity() + r.user.size() + r.database.size() +
             r.policy_group.size() + r.client_addr.size() + r.application_name.size() +
             r.agent_id.size() + r.conversation_id.size() + r.query_intent_sent.size() +
             r.query_intent_inferred.size() + r.statement_kind.size() + r.fingerprint.size() +
             r.deny_code.size() + r.sqlstate.size() + r.protocol.size() + r.instance_id.size();
  for (const auto& t : r.tables) n += t.size() + sizeof(std::string);
  return n;
}

class MemoryQueue final : public RecordQueue {
 public:
  MemoryQueue(size_t max_records, size_t max_bytes)
      : max_records_(max_records), max_bytes_(max_bytes) {}

  bool push(Record&& r) override {
    const size_t bytes = approxBytes(r);
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() + taken_.size() >= max_records_ || bytes_ + bytes > max_bytes_) {
      return false;
    }
    queue_.push_back(Entry{std::move(r), bytes});
    bytes_ += bytes;
    return true;
  }

  bool pushView(RecordView& v) override {
    Record r;
    assignRecord(r, v);
    return push(std::move(r));
  }

  size_t take(std::vector<Record>& out, size_t max) override {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = std::min(max, queue_.size());
    for (size_t i = 0; i < n; ++i) {
      if (i < out.size()) {
        out[i] = std::move(queue_.front().record);
      } else {
        out.push_back(std::move(queue_.front().record));
      }
      taken_.push_back(queue_.front().bytes);
      queue_.pop_front();
    }
    return n;
  }

  void release(size_t n) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < n && !taken_.empty(); ++i) {
      bytes_ -= std::min(bytes_, taken_.front());
      taken_.pop_front();
    }
  }

  size_t abandon() override {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t lost = queue_.size() + taken_.size();
    queue_.clear();
    taken_.clear();
    bytes_ = 0;
    return lost;
  }

  size_t depth() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size() + taken_.size();
  }

  size_t ready() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  struct Entry {
    Record record;
    size_t bytes;
  };

  const size_t max_records_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::deque<Entry> queue_;
  std::deque<size_t> taken_;  // approxBytes of the records the writer holds
  size_t bytes_ = 0;          // approxBytes of queued and taken records
};

}  // namespace

std::unique_ptr<RecordQueue> makeMemoryQueue(size_t max_records, size_t max_bytes) {
  return std::make_unique<MemoryQueue>(max_records, max_bytes);
}

}  // namespace pgwarden::history
