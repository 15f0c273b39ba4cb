// The SQLite store: a WAL-mode file, one transaction per batch through a prepared INSERT, a
// record the spool hands over again skipped by the spool's high-water mark stored with it, and
// retention pruned in small chunks. Busy/locked/IO errors are "retry"; data errors "rejected".
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "history/schema.h"
#include "history/store.h"
#include "history/text.h"

namespace pgwarden::history {

namespace {

// How long one statement waits for another connection's lock before the writer backs off.
// Readers (reports) never block a WAL writer; only another writer can.
constexpr int kWriteBusyTimeoutMs = 250;
constexpr int kOpenBusyTimeoutMs = 5000;
// Page size of a file this store creates (an existing file keeps its own). 8 KiB pages measured
// about 13% less writer CPU per record than SQLite's 4 KiB (history_bench, docs/performance.md):
// fewer pages, WAL frames and B-tree levels per row; 16 KiB and 2 KiB both did worse.
constexpr int kNewPageSize = 8192;
// WAL bytes between checkpoints, whatever the page size (see open()).
constexpr int64_t kCheckpointBytes = 32ll << 20;

// SQLite's memory statistics take a global mutex around every allocation; pgwarden reads none
// of them. Only possible before SQLite initializes: if something in the process already used
// it, the call fails harmlessly and the statistics stay on.
void disableMemoryStatistics() {
  static const int once = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)once;
}

WriteOutcome classify(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_TOOBIG:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
      return WriteOutcome::kRejected;
    default:
      return WriteOutcome::kRetry;  // BUSY, LOCKED, IOERR, FULL, READONLY, CANTOPEN...
  }
}

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(std::string path) : path_(std::move(path)) {}

  ~SqliteStore() override {
    sqlite3_finalize(insert_);
    sqlite3_finalize(prune_age_);
    sqlite3_finalize(prune_rows_);
    sqlite3_finalize(load_mark_);
    sqlite3_finalize(save_mark_);
    sqlite3_finalize(chain_tail_);
    sqlite3_close_v2(db_);
  }

  const char* name() const override { return "sqlite"; }

  Status open() override {
    disableMemoryStatistics();
    int rc = sqlite3_open_v2(path_.c_str(), &db_,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) return Status::fail(path_ + ": " + errorText(rc));
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, kOpenBusyTimeoutMs);
    // WAL: reports read while the writer writes; synchronous=NORMAL syncs at checkpoints, so a
    // power loss may lose the last batches but never corrupts the file.
    std::string mode;
    // Before WAL mode and the first table; a no-op on a file that has them.
    if (auto s = exec(("PRAGMA page_size=" + std::to_string(kNewPageSize)).c_str()); !s.ok()) {
      return s;
    }
    if (auto s = queryText("PRAGMA journal_mode=WAL", &mode); !s.ok()) return s;
    if (mode != "wal") return Status::fail(path_ + ": cannot switch to WAL mode (got " + mode + ")");
    if (auto s = exec("PRAGMA synchronous=NORMAL"); !s.ok()) return s;
    // The four indexes take random page reads per insert; a 16 MiB page cache keeps their hot
    // pages in memory instead of re-reading them from the OS for every batch.
    if (auto s = exec("PRAGMA cache_size=-16384"); !s.ok()) return s;
    // A checkpoint every 32 MiB of WAL rather than 4 MiB: an index page that many batches touch
    // is copied back to the file once, not once per 4 MiB (history_bench, docs/performance.md:
    // about 15% less writer CPU per record). The WAL file is cut back to 64 MiB after a
    // checkpoint. A 256 MiB mmap_size and a 32-row INSERT were measured too; neither helped.
    std::string page_size;
    if (auto s = queryText("PRAGMA page_size", &page_size); !s.ok()) return s;
    const int64_t pages = kCheckpointBytes / std::max<int64_t>(512, std::stoll(page_size));
    if (auto s = exec(("PRAGMA wal_autocheckpoint=" + std::to_string(pages)).c_str()); !s.ok()) {
      return s;
    }
    if (auto s = exec("PRAGMA journal_size_limit=67108864"); !s.ok()) return s;
    if (auto s = exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    bool first = true;
    for (const auto& sql : schemaStatements(Dialect::kSqlite)) {
      Status s = exec(sql.c_str());
      for (const char* column : kAddedColumns) {
        if (s.ok() && first) s = addColumnIfMissing(column);
      }
      first = false;
      if (!s.ok()) {
        (void)exec("ROLLBACK");
        return s;
      }
    }
    std::string version;
    Status checked =
        queryText((std::string("SELECT max(version) FROM ") + kSchemaTable).c_str(), &version);
    if (checked.ok() && std::stoi(version.empty() ? "0" : version) > kSchemaVersion) {
      checked =
          Status::fail(path_ + ": history schema version " + version +
                       " is newer than this pgwarden's (" + std::to_string(kSchemaVersion) + ")");
    }
    if (checked.ok()) checked = moveUidIndexToSpoolMarks();
    if (!checked.ok()) {
      (void)exec("ROLLBACK");
      return checked;
    }
    if (auto s = exec("COMMIT"); !s.ok()) return s;

    std::string insert = std::string("INSERT INTO ") + kHistoryTable + " (" + columnList() +
                         ") VALUES (";
    for (size_t i = 0; i < kColumns.size(); ++i) insert += i == 0 ? "?" : ", ?";
    insert += ")";
    if (auto s = prepare(insert, &insert_); !s.ok()) return s;
    for (Bound& b : bound_) b.kind = Bound::kNone;
    const std::string spool = kSpoolTable;
    if (auto s = prepare("SELECT last_seq FROM " + spool + " WHERE epoch = ?1", &load_mark_);
        !s.ok()) {
      return s;
    }
    if (auto s = prepare("INSERT INTO " + spool + " (epoch, last_seq) VALUES (?1, ?2) " +
                             "ON CONFLICT (epoch) DO UPDATE SET last_seq = excluded.last_seq",
                         &save_mark_);
        !s.ok()) {
      return s;
    }
    const std::string t = kHistoryTable;
    // Newest first by id: the instance's last record is near the end of the table.
    if (auto s = prepare("SELECT chain_seq, chain_key, chain_hash FROM " + t +
                             " WHERE instance_id = ?1 AND chain_seq > 0 ORDER BY id DESC LIMIT 1",
                         &chain_tail_);
        !s.ok()) {
      return s;
    }
    if (auto s = prepare("DELETE FROM " + t + " WHERE id IN (SELECT id FROM " + t +
                             " WHERE started_at < ?1 ORDER BY id LIMIT ?2)",
                         &prune_age_);
        !s.ok()) {
      return s;
    }
    if (auto s = prepare("DELETE FROM " + t + " WHERE id IN (SELECT id FROM " + t +
                             " WHERE id <= (SELECT id FROM " + t +
                             " ORDER BY id DESC LIMIT 1 OFFSET ?1) ORDER BY id LIMIT ?2)",
                         &prune_rows_);
        !s.ok()) {
      return s;
    }
    sqlite3_busy_timeout(db_, kWriteBusyTimeoutMs);
    return {};
  }

  // Exactly once: a spool hands its records over in sequence order, so the highest sequence
  // number stored for its epoch, written in the same transaction as the records, tells which
  // records of a batch handed over again after a crash (stored, not yet marked consumed in the
  // spool) the file already has. They are skipped; anything else refused (an operator's CHECK or
  // trigger) is still a rejected record.
  WriteResult write(std::span<const Record> records) override {
    // A failed ROLLBACK can leave a transaction open; never nest the next batch inside it.
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return {classify(rc), "BEGIN: " + errorText(rc)};
    SpoolMark mark = stored_;
    const char* step = "INSERT";
    for (const Record& r : records) {
      if (r.spool_seq != 0 && (!mark.known || mark.epoch != r.spool_epoch)) {
        step = "spool mark";
        rc = mark.dirty ? saveMark(mark) : SQLITE_DONE;
        if (rc == SQLITE_DONE) rc = loadMark(r.spool_epoch, &mark);
        if (rc != SQLITE_DONE) break;
        step = "INSERT";
      }
      if (r.spool_seq != 0 && r.spool_seq <= mark.seq) continue;  // the file has it
      rc = insertOne(r);
      if (rc != SQLITE_DONE) break;
      if (r.spool_seq != 0) {
        mark.seq = r.spool_seq;
        mark.dirty = true;
      }
    }
    if (rc == SQLITE_DONE && mark.dirty) {
      step = "spool mark";
      rc = saveMark(mark);
    }
    if (rc == SQLITE_DONE || rc == SQLITE_OK) {
      step = "COMMIT";
      rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    }
    if (rc != SQLITE_OK) {
      WriteResult res{classify(rc), std::string(step) + ": " +
                                        (chain_error_.empty() ? errorText(rc) : chain_error_)};
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      if (chain_) chain_->reset();
      return res;
    }
    mark.dirty = false;
    stored_ = mark;
    if (chain_) chain_->commit();
    return {};
  }

  Result<int64_t> prune(const Retention& retention) override {
    int64_t deleted = 0;
    if (retention.cutoff_us > 0) {
      const std::string cutoff = formatTimestampUs(retention.cutoff_us);
      sqlite3_bind_text(prune_age_, 1, cutoff.c_str(), static_cast<int>(cutoff.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_int64(prune_age_, 2, retention.chunk);
      const int rc = sqlite3_step(prune_age_);
      sqlite3_reset(prune_age_);
      if (rc != SQLITE_DONE) return Result<int64_t>::fail("max_age: " + errorText(rc));
      deleted += sqlite3_changes(db_);
    }
    if (retention.max_rows > 0 && deleted < retention.chunk) {
      sqlite3_bind_int64(prune_rows_, 1, retention.max_rows);
      sqlite3_bind_int64(prune_rows_, 2, retention.chunk - deleted);
      const int rc = sqlite3_step(prune_rows_);
      sqlite3_reset(prune_rows_);
      if (rc != SQLITE_DONE) return Result<int64_t>::fail("max_rows: " + errorText(rc));
      deleted += sqlite3_changes(db_);
    }
    return deleted;
  }

 private:
  int insertOne(const Record& r) {
    row_.assign(r);
    chain_error_.clear();
    if (chain_) {
      if (auto linked = chain_->link(row_, [this](std::string_view i) { return chainTail(i); });
          !linked.ok()) {
        chain_error_ = linked.error();
        return SQLITE_ERROR;  // a retry: the store could not be read
      }
    }
    sqlite3_reset(insert_);
    const auto& values = row_.values();
    for (size_t k = 0; k < values.size(); ++k) {
      const Value& v = values[k];
      Bound& b = bound_[k];
      const int idx = static_cast<int>(k) + 1;
      switch (v.type) {
        case ColumnType::kInt:
        case ColumnType::kBool:
          if (b.kind != Bound::kInt || b.i != v.i) {
            sqlite3_bind_int64(insert_, idx, v.i);
            b.kind = Bound::kInt;
            b.i = v.i;
          }
          break;
        case ColumnType::kUid:
          if (v.text.empty()) {
            if (b.kind != Bound::kNull) sqlite3_bind_null(insert_, idx);
            b.kind = Bound::kNull;
            break;
          }
          [[fallthrough]];
        case ColumnType::kTimestamp:
        case ColumnType::kText:
        case ColumnType::kJson:
          if (b.kind != Bound::kText || b.text != v.text) {
            // SQLite reads the store's copy in place (SQLITE_STATIC) at the step; the copy
            // changes only here, together with the binding. A std::string's data() is never
            // NULL, so an empty text is stored as '', not NULL.
            b.text.assign(v.text.data(), v.text.size());
            sqlite3_bind_text(insert_, idx, b.text.data(), static_cast<int>(b.text.size()),
                              SQLITE_STATIC);
            b.kind = Bound::kText;
          }
          break;
      }
    }
    const int rc = sqlite3_step(insert_);
    sqlite3_reset(insert_);
    return rc;
  }

  Result<ChainTail> chainTail(std::string_view instance) {
    sqlite3_reset(chain_tail_);
    sqlite3_bind_text(chain_tail_, 1, instance.data(), static_cast<int>(instance.size()),
                      SQLITE_STATIC);
    int rc = sqlite3_step(chain_tail_);
    ChainTail tail;
    if (rc == SQLITE_ROW) {
      tail.seq = static_cast<uint64_t>(sqlite3_column_int64(chain_tail_, 0));
      const auto* key = sqlite3_column_text(chain_tail_, 1);
      const auto* hash = sqlite3_column_text(chain_tail_, 2);
      tail.key_id = key != nullptr ? reinterpret_cast<const char*>(key) : "";
      // A chain_hash made unreadable by hand: go on from it as from zeros (verify names it)
      // rather than stop recording.
      if (hash == nullptr || !parseChainHash(reinterpret_cast<const char*>(hash), &tail.hash)) {
        tail.hash = {};
      }
      rc = SQLITE_DONE;
    }
    sqlite3_reset(chain_tail_);
    if (rc != SQLITE_DONE) return Result<ChainTail>::fail(errorText(rc));
    return tail;
  }

  // What a parameter of insert_ is bound to. Bindings outlast sqlite3_reset, so a value equal to
  // the last record's (most columns of most records: the same user, group, outcome, an empty
  // text, a 0) is not bound again; each bind costs SQLite more than comparing.
  struct Bound {
    enum Kind : uint8_t { kNone, kInt, kText, kNull };
    Kind kind = kNone;
    int64_t i = 0;
    std::string text;  // a kText parameter's value: the store's copy, which SQLite reads
  };

  // The highest sequence number stored for a spool epoch (0: none yet).
  struct SpoolMark {
    uint64_t epoch = 0;
    uint64_t seq = 0;
    bool known = false;  // epoch and seq were read from (or written to) the file
    bool dirty = false;  // seq is ahead of the file's, inside the open transaction
  };

  // record_uid's first 16 characters: the epoch, zero-padded hex.
  static std::array<char, 16> epochText(uint64_t epoch) {
    Record r;
    r.spool_epoch = epoch;
    r.spool_seq = 1;
    char buf[40];
    std::array<char, 16> out{};
    std::memcpy(out.data(), formatRecordUid(r, buf, sizeof buf).data(), out.size());
    return out;
  }

  int loadMark(uint64_t epoch, SpoolMark* mark) {
    const auto text = epochText(epoch);
    sqlite3_reset(load_mark_);
    sqlite3_bind_text(load_mark_, 1, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
    int rc = sqlite3_step(load_mark_);
    *mark = SpoolMark{epoch, 0, true, false};
    if (rc == SQLITE_ROW) {
      mark->seq = static_cast<uint64_t>(sqlite3_column_int64(load_mark_, 0));
      rc = SQLITE_DONE;
    }
    sqlite3_reset(load_mark_);
    return rc;
  }

  int saveMark(const SpoolMark& mark) {
    const auto text = epochText(mark.epoch);
    sqlite3_reset(save_mark_);
    sqlite3_bind_text(save_mark_, 1, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
    sqlite3_bind_int64(save_mark_, 2, static_cast<int64_t>(mark.seq));
    const int rc = sqlite3_step(save_mark_);
    sqlite3_reset(save_mark_);
    return rc;
  }

  // Schema version 5: a file whose records were made unique by the record_uid index gets the
  // spool marks those records imply, then loses the index (inside open()'s transaction).
  Status moveUidIndexToSpoolMarks() {
    std::string present;
    const std::string t = kHistoryTable;
    if (auto s = queryText(("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = '" +
                            std::string(kUidIndex) + "'")
                               .c_str(),
                           &present);
        !s.ok() || present == "0") {
      return s;
    }
    const std::string seed =
        std::string("INSERT INTO ") + kSpoolTable + " (epoch, last_seq) SELECT substr(" +
        kUidColumn + ", 1, 16), max(CAST(substr(" + kUidColumn + ", 18) AS INTEGER)) FROM " + t +
        " WHERE " + kUidColumn + " IS NOT NULL GROUP BY 1 ON CONFLICT (epoch) DO UPDATE SET " +
        "last_seq = max(last_seq, excluded.last_seq)";
    if (auto s = exec(seed.c_str()); !s.ok()) return s;
    return exec((std::string("DROP INDEX ") + kUidIndex).c_str());
  }

  // A table made by an older pgwarden gets the later columns (record_uid, warnings) in place.
  Status addColumnIfMissing(const char* column) {
    std::string present;
    const std::string sql = std::string("SELECT count(*) FROM pragma_table_info('") +
                            kHistoryTable + "') WHERE name = '" + column + "'";
    if (auto s = queryText(sql.c_str(), &present); !s.ok()) return s;
    if (present != "0") return {};
    return exec(addColumn(Dialect::kSqlite, column).c_str());
  }

  std::string errorText(int rc) const {
    std::string msg = sqlite3_errstr(rc);
    if (db_ != nullptr) {
      const char* detail = sqlite3_errmsg(db_);
      if (detail != nullptr && msg != detail) msg += std::string(" (") + detail + ")";
    }
    return msg;
  }

  Status exec(const char* sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return {};
    std::string msg = path_ + ": " + (err != nullptr ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    return Status::fail(msg);
  }

  Status queryText(const char* sql, std::string* out) {
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql, -1, &st, nullptr);
    if (rc != SQLITE_OK) return Status::fail(path_ + ": " + errorText(rc));
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      const auto* t = sqlite3_column_text(st, 0);
      *out = t != nullptr ? reinterpret_cast<const char*>(t) : "";
      rc = SQLITE_DONE;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return Status::fail(path_ + ": " + errorText(rc));
    return {};
  }

  Status prepare(const std::string& sql, sqlite3_stmt** st) {
    const int rc = sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, st, nullptr);
    if (rc != SQLITE_OK) return Status::fail(path_ + ": " + errorText(rc));
    return {};
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  std::array<Bound, kColumns.size()> bound_;  // insert_'s parameters
  sqlite3_stmt* prune_age_ = nullptr;
  sqlite3_stmt* prune_rows_ = nullptr;
  sqlite3_stmt* load_mark_ = nullptr;
  sqlite3_stmt* save_mark_ = nullptr;
  sqlite3_stmt* chain_tail_ = nullptr;
  std::string chain_error_;  // why link() failed, for the write's error
  SpoolMark stored_;  // as committed (the writer is the only one writing its epoch)
  RowValues row_;
};

}  // namespace

std::unique_ptr<Store> makeSqliteStore(const std::string& path) {
  return std::make_unique<SqliteStore>(path);
}

}  // namespace pgwarden::history
