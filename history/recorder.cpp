// The recorder: submit() (event loop) puts records on a bounded queue (in memory, or the spool
// file with durability: process); one writer thread takes batches, prepares them (redaction,
// UTF-8 repair, truncation), writes them to the store, retrying with capped exponential backoff
// while the store is down, and only then releases them from the queue. Only a full queue drops.
#include "history/recorder.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/log_text.h"
#include "history/json.h"
#include "history/record_queue.h"
#include "history/spool.h"
#include "history/store.h"
#include "history/text.h"
#include "history/writer_priority.h"

namespace pgwarden::history {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kBackoffInitial{100};
constexpr milliseconds kBackoffMax{2000};
constexpr milliseconds kPruneInterval{2000};
constexpr milliseconds kDropLogInterval{5000};
// While the store stays down, a reminder in the log this often (the first failure is logged at
// once, each retry only at debug level).
constexpr milliseconds kDownLogInterval{60000};
constexpr std::chrono::seconds kDestructorFlush{5};
// A writer that has fallen behind (more than a batch waiting) catches up in transactions of up
// to this many batches, at most kCatchUpRecords records (never fewer than batch_size). Each
// commit writes every page it dirtied, and an index with scattered keys (conversation_id)
// dirties about one page per record whatever the batch: fewer, larger commits cost the SQLite
// writer about a quarter less CPU per record at batch_size 512 (docs/performance.md).
constexpr size_t kCatchUpBatches = 8;
constexpr size_t kCatchUpRecords = 8192;
void cutAndShrink(std::string& s, size_t max, bool* flag) {
  if (truncateUtf8(s, max)) {
    s.shrink_to_fit();  // a copy of at most `max` bytes: bounded work, and the memory is freed
    if (flag != nullptr) *flag = true;
  }
}

// The batch keeps its records for the next one: at most `most` of them (what this batch took, or
// an ordinary batch's size once a catch-up is over) and at most kKeepBytes, so ordinary records
// are reused and a batch of long texts is not held on to. Only what is kept is measured: a
// batch of 512 after a catch-up of 8,192 does not walk the other 7,680 records each time.
void keepForReuse(std::vector<Record>& batch, size_t most) {
  constexpr size_t kKeepBytes = 16 << 20;
  if (batch.size() > most) batch.resize(most);
  size_t kept = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    kept += sizeof(Record) + heldBytes(batch[i]);
    if (kept > kKeepBytes) {
      batch.resize(i);
      return;
    }
  }
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "pgwarden";
  return buf;
}

// Store `off`: nothing is queued, nothing counted.
class OffRecorder final : public Recorder {
 public:
  bool submit(Record&&) override { return false; }
  bool submit(RecordView&) override { return false; }
  void shutdown(milliseconds) override {}
  RecorderStats stats() const override { return {}; }
};

class QueueRecorder final : public Recorder {
 public:
  // `down_error` non-empty: the store could not be reached at start-up; the writer starts with it
  // down and keeps trying. `spool`: the queue when it is the spool (for its figures), else null.
  QueueRecorder(HistoryConfig config, std::unique_ptr<Store> store,
                std::unique_ptr<RecordQueue> queue, const Spool* spool, std::string down_error)
      : config_(std::move(config)),
        store_(std::move(store)),
        queue_(std::move(queue)),
        spool_(spool),
        recovered_(spool != nullptr ? spool->recovered() : 0),
        // Only behind the spool: the memory queue's take holds the lock the loop pushes under
        // while it moves a batch, which a writer in the background could keep for long.
        background_(spool != nullptr && config_.background_writer),
        priority_(priorityMarks(config_.queue_size, spool != nullptr ? spool->capacity() : 0)) {
    if (!down_error.empty()) {
      down_ = true;
      down_since_ = Clock::now();
      next_down_log_ = down_since_ + kDownLogInterval;
      next_probe_ = down_since_ + probe_backoff_;
      up_.store(false, std::memory_order_relaxed);
    }
    thread_ = std::thread([this] { run(); });
  }

  ~QueueRecorder() override { shutdown(kDestructorFlush); }

  bool submit(Record&& r) override {
    cutAndShrink(r.sql_text, sqlBound(r.fingerprint), &r.sql_truncated);
    cutAndShrink(r.error_message, config_.max_sql_bytes, nullptr);
    return enqueue([&] { return queue_->push(std::move(r)); });
  }

  bool submit(RecordView& v) override {
    const std::string_view sql = utf8Prefix(v.sql_text, sqlBound(v.fingerprint));
    if (sql.size() < v.sql_text.size()) v.sql_truncated = true;
    v.sql_text = sql;
    v.error_message = utf8Prefix(v.error_message, config_.max_sql_bytes);
    return enqueue([&] { return queue_->pushView(v); });
  }

  void shutdown(milliseconds timeout) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_) {
        stopping_ = true;
        deadline_ = Clock::now() + timeout;
        priority_.finish();
      }
    }
    cv_.notify_all();
    std::lock_guard<std::mutex> join_lock(join_mu_);
    if (thread_.joinable()) thread_.join();
  }

  RecorderStats stats() const override {
    RecorderStats s;
    s.submitted = submitted_.load(std::memory_order_relaxed);
    s.written = written_.load(std::memory_order_relaxed);
    s.dropped = dropped_.load(std::memory_order_relaxed);
    s.write_errors = write_errors_.load(std::memory_order_relaxed);
    s.rejected = rejected_.load(std::memory_order_relaxed);
    s.store_up = up_.load(std::memory_order_relaxed);
    s.recovered = recovered_;
    s.queue_depth = queue_->depth();
    if (spool_ != nullptr) {
      s.spool_used_bytes = spool_->usedBytes();
      s.spool_capacity = spool_->capacity();
    }
    s.writer_background = priority_.background();
    s.writer_promotions = priority_.promotions();
    return s;
  }

 private:
  // How much of a statement's text a queued record holds. The writer needs the whole text to
  // normalize it (redact_literals) or to fingerprint it (a record that comes without one); those
  // wait for the writer to cut them, after that work.
  size_t sqlBound(std::string_view fingerprint) const {
    return config_.redact_literals || fingerprint.empty() ? kMaxRawSqlBytes : config_.max_sql_bytes;
  }

  template <class Push>
  bool enqueue(Push push) {
    submitted_.fetch_add(1, std::memory_order_relaxed);
    bool wake = false;
    {
      // Held across the push so that no record lands after the writer's last look (closed_).
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || !push()) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        if (!closed_) overflow_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      const size_t ready = queue_->ready();
      wake = ready == config_.batch_size;
      if (background_) priority_.afterPush(ready, spool_->usedBytes());
    }
    if (wake) cv_.notify_one();
    return true;
  }

  // Writer thread.
  void run() {
    Clock::time_point next_prune = Clock::now();
    Clock::time_point next_drop_log = Clock::now() + kDropLogInterval;
    uint64_t drops_logged = 0;
    const bool retention = config_.max_age.count() > 0 || config_.max_rows > 0;
    const size_t catch_up = std::max(
        config_.batch_size, std::min(config_.batch_size * kCatchUpBatches, kCatchUpRecords));
    // Kept across batches: the spool decodes into its records' storage (record_queue.h).
    std::vector<Record> batch;
    batch.reserve(config_.batch_size);
    std::string known_actions;  // prepareRecord's last guard_actions
    if (background_) enterBackground();
    for (;;) {
      size_t want = config_.batch_size;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (background_) priority_.beforeWait(queue_->ready(), spool_->usedBytes());
        if (!stopping_ && queue_->ready() < config_.batch_size) {
          cv_.wait_for(lock, config_.flush_interval,
                       [&] { return stopping_ || queue_->ready() >= config_.batch_size; });
        }
        const size_t ready = queue_->ready();
        if (ready == 0 && stopping_) {
          closed_ = true;
          break;
        }
        if (ready > config_.batch_size) want = catch_up;
      }
      // Outside the lock: the spool decodes here while the loop goes on appending.
      const size_t taken = queue_->take(batch, want);
      size_t resolved = 0;
      bool abandoned = false;
      if (taken > 0) {
        const std::span<Record> records(batch.data(), taken);
        for (auto& r : records) prepareRecord(r, config_, &known_actions);
        abandoned = !writeBatch(records, &resolved);
        queue_->release(resolved);
        keepForReuse(batch, std::max(taken, config_.batch_size));
      }
      if (abandoned) {
        abandonQueue();
        break;
      }

      const auto now = Clock::now();
      if (down_ && taken == 0 && now >= next_probe_ && !isStopping()) {
        // Nothing to write, but the store is down: look again, so it is opened (and its schema
        // created) as soon as it is back, not at the next statement.
        const Status probed = store_->probe();
        if (probed.ok()) {
          noteUp();
        } else {
          noteDown(probed.error());
          probe_backoff_ = std::min(probe_backoff_ * 2, kBackoffMax);
          next_probe_ = Clock::now() + probe_backoff_;
        }
      }
      const uint64_t dropped = overflow_.load(std::memory_order_relaxed);
      if (dropped != drops_logged && now >= next_drop_log) {
        spdlog::warn("history: {} records dropped because the queue was full (queue_size={}, "
                     "{} dropped in total)",
                     dropped - drops_logged, config_.queue_size, dropped);
        drops_logged = dropped;
        next_drop_log = now + kDropLogInterval;
      }
      if (retention && !down_ && !isStopping() && now >= next_prune) {
        next_prune = now + kPruneInterval;
        Retention ret;
        if (config_.max_age.count() > 0) {
          const auto age_us =
              std::chrono::duration_cast<std::chrono::microseconds>(config_.max_age).count();
          const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
          ret.cutoff_us = now_us - age_us;
        }
        ret.max_rows = config_.max_rows;
        auto deleted = store_->prune(ret);
        if (!deleted.ok()) {
          spdlog::warn("history: pruning the {} store failed: {}", store_->name(),
                       logsafe(deleted.error(), kLogMessageMaxBytes));
        } else if (*deleted >= ret.chunk) {
          next_prune = now;  // more to delete: go on after the next batch
        }
      }
    }
    const uint64_t dropped = overflow_.load(std::memory_order_relaxed);
    if (dropped != drops_logged) {
      spdlog::warn("history: {} records dropped because the queue was full ({} in total)",
                   dropped - drops_logged, dropped);
    }
  }

  bool isStopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  // Writes the batch, retrying while the store is down. Records the store refuses are isolated
  // by writing the rest one by one, so one bad record cannot hold up the others. `resolved`:
  // how many, from the front, are stored or refused. Returns false when shutdown's deadline
  // passed first (the rest is then left to abandonQueue).
  bool writeBatch(std::span<const Record> batch, size_t* resolved) {
    size_t pos = 0;
    bool one_by_one = false;
    milliseconds backoff = kBackoffInitial;
    while (pos < batch.size()) {
      const size_t n = one_by_one ? 1 : batch.size() - pos;
      const WriteResult res = store_->write(batch.subspan(pos, n));
      switch (res.outcome) {
        case WriteOutcome::kOk:
          written_.fetch_add(n, std::memory_order_relaxed);
          pos += n;
          backoff = kBackoffInitial;
          noteUp();
          break;
        case WriteOutcome::kRejected:
          if (n > 1) {
            one_by_one = true;
            spdlog::warn(
                "history: the {} store refused a batch of {} ({}); writing its records "
                "one by one",
                store_->name(), n, logsafe(res.error, kLogMessageMaxBytes));
          } else {
            rejected_.fetch_add(1, std::memory_order_relaxed);
            spdlog::error("history: the {} store refused a record (session {}, outcome {}): {}",
                          store_->name(), batch[pos].session_id, outcomeName(batch[pos].outcome),
                          logsafe(res.error, kLogMessageMaxBytes));
            ++pos;
          }
          break;
        case WriteOutcome::kRetry: {
          write_errors_.fetch_add(1, std::memory_order_relaxed);
          noteDown(res.error);
          if (!sleepBackoff(backoff)) {
            *resolved = pos;
            spdlog::error("history: shutdown deadline passed with the {} store unavailable ({})",
                          store_->name(), logsafe(res.error, kLogMessageMaxBytes));
            return false;
          }
          backoff = std::min(backoff * 2, kBackoffMax);
          break;
        }
      }
    }
    *resolved = pos;
    return true;
  }

  // The store answered: log the recovery once.
  void noteUp() {
    probe_backoff_ = kBackoffInitial;
    if (!down_) return;
    down_ = false;
    up_.store(true, std::memory_order_relaxed);
    spdlog::info("history: the {} store is writable again after {} ms", store_->name(),
                 std::chrono::duration_cast<milliseconds>(Clock::now() - down_since_).count());
  }

  // An attempt failed: the first failure is a warning, later ones are debug lines plus a
  // reminder every kDownLogInterval, so a long outage stays visible without flooding the log.
  void noteDown(const std::string& error) {
    const auto now = Clock::now();
    up_.store(false, std::memory_order_relaxed);
    if (!down_) {
      down_ = true;
      down_since_ = now;
      next_down_log_ = now + kDownLogInterval;
      spdlog::warn(
          "history: the {} store is unavailable ({}); {} records wait in the queue "
          "and writes are retried with backoff",
          store_->name(), logsafe(error, kLogMessageMaxBytes), stats().queue_depth);
    } else if (now >= next_down_log_) {
      next_down_log_ = now + kDownLogInterval;
      spdlog::warn(
          "history: the {} store is still unavailable after {} s ({}); {} records wait "
          "in the queue (queue_size={})",
          store_->name(),
          std::chrono::duration_cast<std::chrono::seconds>(now - down_since_).count(),
          logsafe(error, kLogMessageMaxBytes), stats().queue_depth, config_.queue_size);
    } else {
      spdlog::debug("history: retrying the {} store failed: {}", store_->name(),
                    logsafe(error, kLogMessageMaxBytes));
    }
  }

  // Waits `delay` before the next attempt; wakes early when shutdown starts so the deadline is
  // honoured. Returns false when shutdown's deadline has passed.
  bool sleepBackoff(milliseconds delay) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool was_stopping = stopping_;
    auto until = Clock::now() + delay;
    if (stopping_) until = std::min(until, deadline_);
    cv_.wait_until(lock, until, [&] { return stopping_ != was_stopping; });
    return !(stopping_ && Clock::now() >= deadline_);
  }

  // Writer thread, at its start: into the background when the process may come back from it
  // (else a backlog could not promote it).
  void enterBackground() {
    std::string why;
    bool entered = canLeaveBackground(&why);
    if (entered) {
      std::lock_guard<std::mutex> lock(mu_);
      entered = priority_.enter(&why);
    }
    if (entered) {
      spdlog::debug("history: the writer runs in the background (SCHED_BATCH, nice 19) while it keeps up");
    } else {
      spdlog::info("history: the writer stays under the normal CPU policy ({})", why);
    }
  }

  // After shutdown's deadline: what the store has not taken is lost (memory queue, counted as
  // dropped) or stays in the spool for the next start.
  void abandonQueue() {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t lost = queue_->abandon();
    dropped_.fetch_add(lost, std::memory_order_relaxed);
    if (lost > 0) spdlog::error("history: {} queued records not written at shutdown", lost);
    if (const size_t kept = queue_->depth(); kept > 0) {
      spdlog::warn("history: {} records not written at shutdown stay in the spool {} and are "
                   "written at the next start",
                   kept, spool_ != nullptr ? spool_->path() : std::string());
    }
    closed_ = true;
  }

  const HistoryConfig config_;
  std::unique_ptr<Store> store_;
  const std::unique_ptr<RecordQueue> queue_;
  const Spool* const spool_;
  const uint64_t recovered_;
  const bool background_;     // the writer may run in the background (behind a spool)
  WriterPriority priority_;   // its changes under mu_

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool closed_ = false;       // the writer has exited: submit drops
  Clock::time_point deadline_{};

  // Writer-thread state.
  bool down_ = false;
  Clock::time_point down_since_{};
  Clock::time_point next_down_log_{};
  Clock::time_point next_probe_{};
  milliseconds probe_backoff_ = kBackoffInitial;
  std::atomic<bool> up_{true};  // read by stats() on other threads

  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> write_errors_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> overflow_{0};  // the part of dropped_ due to a full queue (for the log)

  std::mutex join_mu_;
  std::thread thread_;
};

}  // namespace

void prepareRecord(Record& r, const HistoryConfig& config, std::string* known_actions) {
  if (r.instance_id.empty()) r.instance_id = config.instance_id;
  // The daemon fingerprints every statement it parses; fill the gap for one it did not, from the
  // raw text (a cut text would give a different shape).
  if (r.fingerprint.empty() && !r.sql_text.empty() && !r.sql_truncated) {
    auto fp = fingerprintSql(r.sql_text);
    if (fp.ok()) r.fingerprint = std::move(*fp);
  }
  if (config.redact_literals && !r.sql_text.empty()) {
    // Normalize before cutting: a cut text may not parse, and its literals would be kept.
    auto normalized = r.sql_truncated ? Result<std::string>::fail("cut") : normalizeSql(r.sql_text);
    r.sql_text = normalized.ok() ? std::move(*normalized) : std::string(kRedactedUnparsable);
  }
  for (std::string* s :
       {&r.instance_id, &r.user, &r.database, &r.policy_group, &r.client_addr,
        &r.application_name, &r.agent_id, &r.conversation_id, &r.query_intent_sent,
        &r.query_intent_inferred, &r.statement_kind, &r.sql_text, &r.fingerprint,
        &r.guard_actions, &r.deny_code, &r.sqlstate, &r.error_message, &r.protocol}) {
    sanitizeUtf8(*s);
  }
  for (auto& t : r.tables) sanitizeUtf8(t);
  if (truncateUtf8(r.sql_text, config.max_sql_bytes)) r.sql_truncated = true;
  truncateUtf8(r.error_message, config.max_sql_bytes);

  if (r.guard_actions.empty()) {
    r.guard_actions = "[]";
    return;
  }
  if (known_actions != nullptr && r.guard_actions == *known_actions) return;  // as prepared before
  if (!isJsonValue(r.guard_actions)) {
    // Keep what was given, as a JSON string, rather than lose it or poison the batch.
    std::string quoted;
    appendJsonString(quoted, r.guard_actions);
    r.guard_actions = std::move(quoted);
  }
  // Valid JSON can still span lines (whitespace between tokens: a raw newline cannot sit inside
  // a JSON string); one record must stay one line in the jsonl store.
  for (char& c : r.guard_actions) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  // PostgreSQL's jsonb refuses the \u0000 escape; the text itself is never NUL after repair.
  for (size_t p = r.guard_actions.find("\\u0000"); p != std::string::npos;
       p = r.guard_actions.find("\\u0000", p)) {
    r.guard_actions.replace(p, 6, "\\ufffd");
  }
  if (known_actions != nullptr) *known_actions = r.guard_actions;
}

uint64_t minSpoolSize(size_t max_sql_bytes) {
  // Room for four of the largest records: a statement text kept whole for the writer, an error
  // message, and the rest of the record.
  const uint64_t largest = std::max<uint64_t>(max_sql_bytes, kMaxRawSqlBytes) + max_sql_bytes +
                           (64u << 10);
  constexpr uint64_t kMiB = 1u << 20;
  return (4 * largest + kMiB - 1) / kMiB * kMiB;
}

namespace {

// The queue for the config: the spool (durability: process), its recovered records logged, or
// memory. Throws std::runtime_error when the spool cannot be used.
std::unique_ptr<RecordQueue> makeQueue(const HistoryConfig& c, const Spool** spool_out) {
  const std::string path = spoolPath(c);
  if (c.durability == Durability::kOff) {
    HistoryConfig with_spool = c;
    with_spool.durability = Durability::kProcess;
    const std::string left = spoolPath(with_spool);
    std::error_code ec;
    if (!left.empty() && std::filesystem::exists(left, ec)) {
      spdlog::warn("history: durability is off; records still in the spool {} are written "
                   "only after a start with durability: process",
                   left);
    }
    return makeMemoryQueue(c.queue_size, c.queue_size * (2 * c.max_sql_bytes + 1024));
  }
  if (path.empty()) {
    throw std::runtime_error("history: durability: process needs history.spool_path for the " +
                             c.store + " store");
  }
  auto opened = Spool::open(SpoolOptions{path, c.spool_size, c.queue_size});
  if (!opened.ok()) throw std::runtime_error("history: cannot open the spool: " + opened.error());
  std::unique_ptr<Spool> spool = std::move(*opened);
  if (spool->recovered() > 0) {
    spdlog::warn("history: {} records from before the last stop found in the spool {}; they are "
                 "written to the {} store before new ones",
                 spool->recovered(), path, c.store);
  }
  *spool_out = spool.get();
  return spool;
}

}  // namespace

std::unique_ptr<Recorder> makeRecorderWithStore(const HistoryConfig& config,
                                                std::unique_ptr<Store> store) {
  HistoryConfig c = config;
  if (c.instance_id.empty()) c.instance_id = hostName();
  if (c.batch_size > c.queue_size) c.batch_size = c.queue_size;
  if (c.chain && !c.chain_key_file.empty()) {
    auto keys = loadChainKeys(c.chain_key_file, true);
    if (!keys.ok()) throw std::runtime_error("history: the chain's key file: " + keys.error());
    store->attachChain(std::make_unique<Chainer>(std::move(*keys)));
  }
  const Status opened = store->open();
  std::string down_error;
  if (!opened.ok()) {
    if (!store->openFailureIsOutage()) {
      throw std::runtime_error("history: cannot open the " + std::string(store->name()) +
                               " store: " + opened.error());
    }
    // A history database that is down must not keep the proxy down with it.
    down_error = opened.error();
    spdlog::warn("history: the {} store is unavailable at start-up ({}); pgwarden starts "
                 "anyway: records wait in the {} (up to {}) and the writer retries with "
                 "backoff, creating the table when the store comes up",
                 store->name(), logsafe(down_error, kLogMessageMaxBytes),
                 c.durability == Durability::kProcess ? "spool" : "queue", c.queue_size);
  }
  const Spool* spool = nullptr;
  std::unique_ptr<RecordQueue> queue = makeQueue(c, &spool);
  return std::make_unique<QueueRecorder>(std::move(c), std::move(store), std::move(queue), spool,
                                         std::move(down_error));
}

std::unique_ptr<Recorder> makeRecorder(const HistoryConfig& config) {
  if (config.store == "off") return std::make_unique<OffRecorder>();
  std::unique_ptr<Store> store;
  if (config.store == "sqlite") {
    store = makeSqliteStore(config.path);
  } else if (config.store == "postgres") {
    store = makePostgresStore(config.dsn);
  } else if (config.store == "jsonl") {
    store = makeJsonlStore(config.path);
  } else {
    throw std::runtime_error("history: unknown store '" + config.store + "'");
  }
  return makeRecorderWithStore(config, std::move(store));
}

}  // namespace pgwarden::history
