// One refresh job per server database: borrow the internal pool's connection, run the guards'
// catalog query with the simple protocol, collect the text rows, swap the snapshot pointer. Then,
// on the same connection, read min/max through a btree index for the few columns pg_stats gives
// no bounds for (one Query each, a short statement_timeout), and swap the pointer again.
#include "daemon/catalog_stats.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_text.h"
#include "session/client_session.h"
#include "daemon/daemon.h"

namespace pgwarden::daemon {

class CatalogRefresher::Job final : public pool::ServerWaiter, public pool::ServerLink {
 public:
  Job(Daemon& daemon, std::string db) : daemon_(daemon), db_(std::move(db)) {}
  ~Job() { stop(); }

  std::shared_ptr<const analysis::TableStatsSnapshot> snapshot() const { return snapshot_; }
  bool loading() const { return !done_once_ && !failed_once_; }
  uint64_t loadedAtMs() const { return loaded_at_ms_; }
  void addWaiter(uint64_t session_id) {
    if (waiters_.size() < 100000) waiters_.push_back(session_id);
  }

  // The database is gone for good (3D000): no refresh until a client logs in to it again.
  bool gone() const { return gone_; }
  void revive(uint64_t now_ms) {
    gone_ = false;
    failures_ = 0;
    next_due_ms_ = 0;
    tick(now_ms);
  }

  // An operator asked for fresh statistics (SIGHUP): the next tick reads the catalog, even with
  // the periodic refresh off. A refresh under way already reads it.
  void refreshNow(uint64_t now_ms) {
    if (gone_ || running_ || waiting_) return;
    next_due_ms_ = 0;
    forced_ = true;
    tick(now_ms);
  }

  void tick(uint64_t now_ms) {
    if (gone_ || running_ || waiting_ || now_ms < next_due_ms_) return;
    if (done_once_ && daemon_.config()->upstream.stats_refresh.count() == 0 && !forced_) return;
    forced_ = false;
    waiting_ = true;
    pool_ = &daemon_.pools().pool(db_, true);
    pool_->acquire(this);
  }

  void stop() {
    if (waiting_ && pool_) pool_->cancelWait(this);
    waiting_ = false;
    if (server_) {
      pool::ServerConnection* s = server_;
      server_ = nullptr;
      s->release(running_ ? 1 : 0, false);
    }
    running_ = false;
    probing_ = false;
    probes_.clear();
  }

  // ServerWaiter
  void onServerReady(pool::ServerConnection& c) override {
    waiting_ = false;
    server_ = &c;
    running_ = true;
    failed_ = false;
    error_.clear();
    rows_.clear();
    column_rows_.clear();
    probing_ = false;
    probes_.clear();
    result_sets_ = 0;
    completed_ = 0;
    column_error_.clear();
    c.attach(this);
    // Tables, then columns: two statements in one Query, one round trip per refresh.
    const std::string sql = std::string(analysis::TableStatsSnapshot::catalogQuery()) + ";\n" +
                            analysis::columnStatsQuery();
    protocol::writeQuery(c.out(), sql);
    if (c.flush() != 0) c.close("write failed");
  }
  // pgwarden's own pool is on the primary: its waiters never move, but the pointer follows.
  void onWaitMoved(pool::Pool& to) override { pool_ = &to; }
  void onServerFailed(const std::string& sqlstate, const std::string& message) override {
    waiting_ = false;
    fail("no server connection: " + message, sqlstate == "3D000");
  }

  // ServerLink
  void onServerMessage(pool::ServerConnection& s, const protocol::Frame& f) override {
    if (probing_) {
      onProbeMessage(s, f);
      return;
    }
    switch (f.type) {
      case protocol::be::kRowDescription:
        ++result_sets_;
        return;
      case protocol::be::kDataRow: {
        auto& into = result_sets_ <= 1 ? rows_ : column_rows_;
        if (into.size() >= kMaxRows) return;
        auto cells = protocol::parseDataRowValues(f.body);
        if (!cells) {
          failed_ = true;
          error_ = "malformed row";
          return;
        }
        std::vector<std::string> row;
        row.reserve(cells->size());
        for (const auto& c : *cells) row.emplace_back(c ? std::string(*c) : std::string());
        into.push_back(std::move(row));
        return;
      }
      case protocol::be::kCommandComplete:
        ++completed_;
        return;
      case protocol::be::kErrorResponse: {
        auto e = protocol::parseErrorFields(f.body);
        std::string why = e ? std::string(e->sqlstate()) + " " + std::string(e->message()) : "error";
        // The column statistics are extra: without them the result screens stay silent, and
        // the table sizes the guards need still count.
        if (completed_ >= 1) {
          column_error_ = std::move(why);
          column_rows_.clear();
          return;
        }
        failed_ = true;
        error_ = std::move(why);
        return;
      }
      case protocol::be::kReadyForQuery: {
        if (failed_) {
          finish(s);
          fail("catalog query failed: " + error_);
          return;
        }
        auto& c = daemon_.counters();
        ++c.stats_refreshes;
        if (!column_error_.empty()) {
          spdlog::warn("column statistics for db={} not read: {}; result screens that need them stay silent",
                       logsafe(db_), logsafe(column_error_, kLogMessageMaxBytes));
        }
        auto fresh = analysis::TableStatsSnapshot::fromRows(rows_, column_rows_);
        // Until this refresh's probes land, columns keep the index bounds the last one read.
        snapshot_ = snapshot_ ? fresh->withIndexBounds({}, snapshot_.get()) : std::move(fresh);
        loaded_at_ms_ = daemon_.nowMs();
        rows_.clear();
        rows_.shrink_to_fit();
        column_rows_.clear();
        column_rows_.shrink_to_fit();
        done_once_ = true;
        failures_ = 0;
        wakeWaiters();
        const auto every = daemon_.config()->upstream.stats_refresh.count();
        next_due_ms_ = daemon_.nowMs() + static_cast<uint64_t>(every > 0 ? every : 0);
        spdlog::debug("catalog statistics for db={}: {} tables", logsafe(db_), snapshot_->size());
        probes_ = snapshot_->boundsProbes(probe_cursor_, kMaxBoundsProbes);
        probe_cursor_ += probes_.size();
        next_probe_ = 0;
        if (probes_.empty()) {
          finish(s);
          return;
        }
        probing_ = true;
        sendProbe(s);
        return;
      }
      default:
        return;  // notices
    }
  }
  void onServerChunk(pool::ServerConnection&, char, std::string_view, bool, bool) override {
    // A catalog row above the streaming threshold is not something we can use.
    if (probing_) {
      probe_failed_ = true;
      return;
    }
    failed_ = true;
    error_ = "oversized row";
  }
  void onServerReadDone(pool::ServerConnection&) override {}
  void onServerWritten(pool::ServerConnection&) override {}
  void onServerLost(pool::ServerConnection&, const std::string& why) override {
    server_ = nullptr;
    running_ = false;
    if (probing_) {
      // The snapshot is already in place: keep what the probes found so far.
      spdlog::warn("index bounds for db={} not all read: connection lost: {}", logsafe(db_),
                   logsafe(why, kLogMessageMaxBytes));
      endProbes();
      return;
    }
    fail("connection lost: " + why);
  }

 private:
  // At most this many min/max reads per refresh: each is two index probes, so this bounds the
  // refresh to about a hundred cheap index lookups; columns past it are read by later refreshes.
  static constexpr size_t kMaxBoundsProbes = 64;
  // Each read's statement_timeout: two index probes take well under a millisecond; a read that
  // does not (a bloated index, a lock) is given up rather than hold the refresh.
  static constexpr int kBoundsProbeTimeoutMs = 200;

  void finish(pool::ServerConnection& s) {
    running_ = false;
    server_ = nullptr;
    s.release(0, false);
  }

  void sendProbe(pool::ServerConnection& s) {
    const auto& p = probes_[next_probe_];
    probe_failed_ = false;
    protocol::writeQuery(
        s.out(), analysis::boundsProbeQuery(p.schema, p.table, p.column, kBoundsProbeTimeoutMs));
    if (s.flush() != 0) s.close("write failed");
  }

  void onProbeMessage(pool::ServerConnection& s, const protocol::Frame& f) {
    auto& p = probes_[next_probe_];
    switch (f.type) {
      case protocol::be::kDataRow: {
        auto cells = protocol::parseDataRowValues(f.body);
        std::vector<std::string> row;
        if (cells) {
          for (const auto& c : *cells) row.emplace_back(c ? std::string(*c) : std::string());
        }
        if (probe_failed_ || !analysis::parseBoundsRow(row, &p.low, &p.high)) {
          p.low.clear();
          p.high.clear();
        }
        return;
      }
      case protocol::be::kErrorResponse: {
        auto e = protocol::parseErrorFields(f.body);
        spdlog::debug("index bounds of {}.{}.{} for db={} not read: {}", logsafe(p.schema),
                      logsafe(p.table), logsafe(p.column), logsafe(db_),
                      logsafe(e ? e->message() : std::string_view("error"), kLogMessageMaxBytes));
        probe_failed_ = true;
        p.low.clear();
        p.high.clear();
        return;
      }
      case protocol::be::kReadyForQuery:
        if (probe_failed_) {
          p.low.clear();
          p.high.clear();
        }
        if (++next_probe_ < probes_.size()) {
          sendProbe(s);
          return;
        }
        finish(s);
        endProbes();
        return;
      default:
        return;  // RowDescription, CommandComplete, notices
    }
  }

  // Publishes what the probes read (the ones never answered count as not probed) and ends.
  void endProbes() {
    probing_ = false;
    probes_.resize(next_probe_);
    size_t found = 0;
    for (const auto& p : probes_) found += p.low.empty() ? 0 : 1;
    if (snapshot_ && !probes_.empty()) snapshot_ = snapshot_->withIndexBounds(probes_, nullptr);
    spdlog::debug("index bounds for db={}: {} of {} columns read", logsafe(db_), found,
                  probes_.size());
    probes_.clear();
    probes_.shrink_to_fit();
  }

  void wakeWaiters() {
    std::vector<uint64_t> ids;
    ids.swap(waiters_);
    for (uint64_t id : ids) {
      if (session::ClientSession* s = daemon_.primary().findSession(id)) s->onStatsReady();
    }
  }

  // A failed refresh is retried after a pause that doubles with each failure in a row (from
  // stats_refresh or kRetryMs, whichever is shorter, up to kMaxRetryMs); a database that does
  // not exist is not retried at all until a client logs in to it (CatalogRefresher::watch).
  void fail(const std::string& why, bool gone = false) {
    failed_once_ = true;
    wakeWaiters();
    ++daemon_.counters().stats_refresh_errors;
    rows_.clear();
    column_rows_.clear();
    if (gone) {
      gone_ = true;
      spdlog::warn(
          "catalog statistics for db={} not refreshed: {}; the database is gone: no "
          "retries until a client connects to it again",
          logsafe(db_), logsafe(why, kLogMessageMaxBytes));
      return;
    }
    const auto every = static_cast<uint64_t>(daemon_.config()->upstream.stats_refresh.count());
    const uint64_t base = every > 0 && every < kRetryMs ? every : kRetryMs;
    const int doublings = std::min(failures_++, 16);
    const uint64_t retry = std::min(base << doublings, std::max(base, kMaxRetryMs));
    next_due_ms_ = daemon_.nowMs() + retry;
    spdlog::warn("catalog statistics for db={} not refreshed: {}; retrying in {} s", logsafe(db_),
                 logsafe(why, kLogMessageMaxBytes), retry / 1000);
  }

  Daemon& daemon_;
  std::string db_;
  pool::Pool* pool_ = nullptr;
  pool::ServerConnection* server_ = nullptr;
  std::shared_ptr<const analysis::TableStatsSnapshot> snapshot_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::vector<std::string>> column_rows_;
  std::vector<analysis::TableStatsSnapshot::IndexBounds> probes_;  // this refresh's min/max reads
  size_t next_probe_ = 0;      // the one in flight while probing_
  size_t probe_cursor_ = 0;    // where the next refresh starts among the columns to probe
  bool probing_ = false;
  bool probe_failed_ = false;  // the read in flight failed or its row was unusable
  int result_sets_ = 0;        // RowDescriptions seen: 1 tables, 2 columns
  int completed_ = 0;          // CommandCompletes seen
  std::string column_error_;   // the column query failed (the tables query did not)
  uint64_t loaded_at_ms_ = 0;
  std::string error_;
  uint64_t next_due_ms_ = 0;
  bool forced_ = false;
  bool waiting_ = false;
  bool running_ = false;
  bool failed_ = false;
  bool done_once_ = false;
  bool failed_once_ = false;
  bool gone_ = false;
  int failures_ = 0;               // failed refreshes in a row
  std::vector<uint64_t> waiters_;  // sessions holding their first ReadyForQuery for the load
};

CatalogRefresher::CatalogRefresher(Daemon& daemon) : daemon_(daemon) {}

CatalogRefresher::~CatalogRefresher() = default;

std::shared_ptr<const analysis::TableStatsSnapshot> CatalogRefresher::get(
    const std::string& server_db) const {
  auto it = jobs_.find(server_db);
  return it == jobs_.end() ? nullptr : it->second->snapshot();
}

void CatalogRefresher::forEachAge(
    const std::function<void(const std::string&, uint64_t)>& fn) const {
  const uint64_t now = daemon_.nowMs();
  for (const auto& [db, job] : jobs_) {
    if (job->loadedAtMs() > 0) fn(db, now > job->loadedAtMs() ? now - job->loadedAtMs() : 0);
  }
}

void CatalogRefresher::watch(const std::string& server_db) {
  if (stopped_) return;
  if (auto it = jobs_.find(server_db); it != jobs_.end()) {
    if (it->second->gone()) it->second->revive(daemon_.nowMs());
    return;
  }
  if (jobs_.size() >= kMaxDatabases) return;
  auto& job = jobs_[server_db];
  job = std::make_unique<Job>(daemon_, server_db);
  job->tick(daemon_.nowMs());
}

std::vector<std::string> CatalogRefresher::databases() const {
  std::vector<std::string> out;
  out.reserve(jobs_.size());
  for (const auto& [db, job] : jobs_) out.push_back(db);
  return out;
}

bool CatalogRefresher::loading(const std::string& server_db) const {
  auto it = jobs_.find(server_db);
  return it != jobs_.end() && it->second->loading();
}

void CatalogRefresher::notifyWhenLoaded(const std::string& server_db, uint64_t session_id) {
  auto it = jobs_.find(server_db);
  if (it != jobs_.end()) it->second->addWaiter(session_id);
}

void CatalogRefresher::refreshNow() {
  if (stopped_) return;
  for (auto& [db, job] : jobs_) job->refreshNow(daemon_.nowMs());
}

void CatalogRefresher::tick(uint64_t now_ms) {
  if (stopped_) return;
  for (auto& [db, job] : jobs_) job->tick(now_ms);
}

void CatalogRefresher::stop() {
  stopped_ = true;
  for (auto& [db, job] : jobs_) job->stop();
}

}  // namespace pgwarden::daemon
