// The PostgreSQL store: libpq on the writer thread (blocking is fine there), the schema created
// if missing under an advisory lock, one COPY per batch (records already stored, found by their
// record_uid, are skipped), and a reconnect (with the recorder's backoff) whenever the connection
// fails. Data errors are "rejected", everything else "retry".
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/log_text.h"
#include "history/schema.h"
#include "history/store.h"
#include "history/text.h"

namespace pgwarden::history {

namespace {

// Serializes schema creation between pgwarden instances sharing one database.
constexpr const char* kSchemaLockKey = "7432001";

void appendCopyText(std::string& out, std::string_view s) {
  // COPY text format: backslash, newline, carriage return and tab must be escaped.
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out.push_back(c);
    }
  }
}

// One line for the log: the primary message and SQLSTATE only. DETAIL and CONTEXT are left out
// on purpose: for a refused row they quote the row itself (statement text, literals).
std::string resultError(const PGresult* res, const PGconn* conn) {
  std::string msg;
  const char* primary = res != nullptr ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  if (primary != nullptr && *primary != '\0') {
    msg = primary;
    if (state != nullptr) msg += std::string(" (SQLSTATE ") + state + ")";
  } else {
    msg = PQerrorMessage(conn);
  }
  for (char& c : msg) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  return msg;
}

// libpq's words on a connection string that does not parse, without the values it may quote (a
// password in a URI): a quoted token is kept only when it is a connection keyword.
std::string conninfoError(const char* errmsg) {
  std::string in = errmsg != nullptr ? errmsg : "invalid connection string";
  std::vector<std::string> keywords;
  if (PQconninfoOption* defaults = PQconndefaults(); defaults != nullptr) {
    for (const PQconninfoOption* o = defaults; o->keyword != nullptr; ++o) {
      keywords.emplace_back(o->keyword);
    }
    PQconninfoFree(defaults);
  }
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t open = in.find('"', pos);
    const size_t close = open == std::string::npos ? open : in.find('"', open + 1);
    if (close == std::string::npos) {
      out += in.substr(pos);
      break;
    }
    const std::string token = in.substr(open + 1, close - open - 1);
    const bool keyword = std::find(keywords.begin(), keywords.end(), token) != keywords.end();
    out += in.substr(pos, open - pos) + "\"" + (keyword ? token : std::string("...")) + "\"";
    pos = close + 1;
  }
  for (char& c : out) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Server notices (e.g. "relation already exists, skipping" from CREATE ... IF NOT EXISTS) are
// expected; keep them out of stderr.
void onNotice(void*, const char* message) {
  std::string m = message != nullptr ? message : "";
  while (!m.empty() && m.back() == '\n') m.pop_back();
  spdlog::debug("history: postgres notice: {}", logsafe(m, kLogMessageMaxBytes));
}

class PostgresStore final : public Store {
 public:
  explicit PostgresStore(std::string dsn) : dsn_(std::move(dsn)) {
    copy_sql_ = std::string("COPY ") + kHistoryTable + " (" + columnList() + ") FROM STDIN";
  }

  ~PostgresStore() override { disconnect(); }

  const char* name() const override { return "postgres"; }

  Status open() override {
    outage_ = false;
    // A plain word is a database name to libpq; anything else must parse, or no retry will help.
    const bool conninfo = dsn_.find('=') != std::string::npos ||
                          dsn_.rfind("postgresql://", 0) == 0 || dsn_.rfind("postgres://", 0) == 0;
    if (conninfo) {
      char* err = nullptr;
      PQconninfoOption* parsed = PQconninfoParse(dsn_.c_str(), &err);
      if (parsed == nullptr) {
        std::string msg = "the connection string does not parse: " + conninfoError(err);
        PQfreemem(err);
        return Status::fail(msg);
      }
      PQconninfoFree(parsed);
    }
    return connect();
  }

  bool openFailureIsOutage() const override { return outage_; }

  Status probe() override {
    if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return {};
    return connect();
  }

  WriteResult write(std::span<const Record> records) override {
    if (conn_ == nullptr) {
      if (auto s = connect(); !s.ok()) return {WriteOutcome::kRetry, s.error()};
    }
    buffer_.clear();
    chain_error_.clear();
    for (const Record& r : records) appendRow(r);
    bool uid_conflict = false;
    WriteResult out = chain_error_.empty() ? copyIn(copy_sql_, &uid_conflict)
                                           : WriteResult{WriteOutcome::kRetry, chain_error_};
    // Some of the batch is stored already: the spool handed it over again after a crash, or a
    // connection lost after the server committed the last COPY. Store the rest.
    if (uid_conflict) out = chain_ ? writeUnstoredChained(records) : writeSkippingStored();
    if (chain_) {
      if (out.outcome == WriteOutcome::kOk) {
        chain_->commit();
      } else {
        chain_->reset();
      }
    }
    if (out.outcome == WriteOutcome::kRetry) disconnect();
    return out;
  }

  Result<int64_t> prune(const Retention& retention) override {
    if (conn_ == nullptr) return Result<int64_t>::fail("not connected");
    const std::string t = kHistoryTable;
    int64_t deleted = 0;
    const std::string chunk = std::to_string(retention.chunk);
    if (retention.cutoff_us > 0) {
      const std::string cutoff = formatTimestampUs(retention.cutoff_us);
      auto n = exec("DELETE FROM " + t + " WHERE id IN (SELECT id FROM " + t +
                        " WHERE started_at < $1 ORDER BY id LIMIT $2)",
                    {cutoff, chunk});
      if (!n.ok()) return n;
      deleted += *n;
    }
    if (retention.max_rows > 0 && deleted < retention.chunk) {
      auto n = exec("DELETE FROM " + t + " WHERE id IN (SELECT id FROM " + t +
                        " WHERE id <= (SELECT id FROM " + t +
                        " ORDER BY id DESC LIMIT 1 OFFSET $1) ORDER BY id LIMIT $2)",
                    {std::to_string(retention.max_rows), std::to_string(retention.chunk - deleted)});
      if (!n.ok()) return n;
      deleted += *n;
    }
    return deleted;
  }

 private:
  Status connect() {
    disconnect();
    // Defaults first; the DSN (expanded from `dbname`) overrides them; client_encoding last so
    // the text we send is always read as UTF-8 (it is repaired to UTF-8 before it gets here).
    const char* keys[] = {"connect_timeout", "application_name", "keepalives",
                          "keepalives_idle", "keepalives_interval", "keepalives_count",
                          "tcp_user_timeout", "dbname", "client_encoding", nullptr};
    const char* values[] = {"5", "pgwarden-history", "1", "10", "5", "3", "30000",
                            dsn_.c_str(), "UTF8", nullptr};
    conn_ = PQconnectdbParams(keys, values, 1);
    if (conn_ == nullptr) return Status::fail("out of memory");
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = resultError(nullptr, conn_);
      disconnect();
      outage_ = true;
      return Status::fail(msg);
    }
    PQsetNoticeProcessor(conn_, onNotice, nullptr);
    if (auto s = ensureSchema(); !s.ok()) {
      // Lost on the way is an outage; the server refusing the schema (rights, a newer version)
      // is for the operator to fix.
      outage_ = conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK;
      disconnect();
      return s;
    }
    return {};
  }

  // COPY of buffer_ with `sql`; the first failure, classified. `uid_conflict`: the failure is a
  // record_uid already in the table.
  WriteResult copyIn(const std::string& sql, bool* uid_conflict) {
    PGresult* res = PQexec(conn_, sql.c_str());
    if (PQresultStatus(res) != PGRES_COPY_IN) return failed(res, "COPY");
    PQclear(res);
    constexpr size_t kChunk = 1 << 20;
    for (size_t off = 0; off < buffer_.size(); off += kChunk) {
      const size_t n = std::min(kChunk, buffer_.size() - off);
      if (PQputCopyData(conn_, buffer_.data() + off, static_cast<int>(n)) != 1) {
        return failed(nullptr, "COPY data");
      }
    }
    if (PQputCopyEnd(conn_, nullptr) != 1) return failed(nullptr, "COPY end");
    WriteResult out;
    while ((res = PQgetResult(conn_)) != nullptr) {
      if (PQresultStatus(res) != PGRES_COMMAND_OK && out.outcome == WriteOutcome::kOk) {
        out = classify(res, "COPY");
        const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        const char* constraint = PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME);
        *uid_conflict = state != nullptr && std::strcmp(state, "23505") == 0 &&
                        constraint != nullptr && std::strcmp(constraint, kUidIndex) == 0;
      }
      PQclear(res);
    }
    return out;
  }

  // The batch through a temporary table and INSERT ... ON CONFLICT (record_uid) DO NOTHING, in
  // one transaction: slower than a plain COPY, so used only when that found a record stored.
  WriteResult writeSkippingStored() {
    const std::string cols = columnList();
    const std::string t = kHistoryTable;
    const std::string incoming = "pgwarden_history_incoming";
    WriteResult out = step("BEGIN");
    if (out.outcome == WriteOutcome::kOk) {
      out = step("CREATE TEMP TABLE IF NOT EXISTS " + incoming +
                 " ON COMMIT DELETE ROWS AS SELECT " + cols + " FROM " + t + " WITH NO DATA");
    }
    bool ignored = false;
    if (out.outcome == WriteOutcome::kOk) {
      out = copyIn("COPY " + incoming + " (" + cols + ") FROM STDIN", &ignored);
    }
    if (out.outcome == WriteOutcome::kOk) {
      out = step("INSERT INTO " + t + " (" + cols + ") SELECT " + cols + " FROM " + incoming +
                 " ORDER BY ctid ON CONFLICT (" + kUidColumn + ") DO NOTHING");
    }
    if (out.outcome == WriteOutcome::kOk) out = step("COMMIT");
    if (out.outcome != WriteOutcome::kOk && conn_ != nullptr &&
        PQstatus(conn_) == CONNECTION_OK) {
      PQclear(PQexec(conn_, "ROLLBACK"));
    }
    return out;
  }

  // With the chain: the records the table has are left out before linking the rest, so a record
  // stored before a crash keeps its place and the chain has no gap.
  WriteResult writeUnstoredChained(std::span<const Record> records) {
    chain_->reset();
    std::string uids = "{";
    for (const Record& r : records) {
      if (r.spool_seq == 0) continue;
      if (uids.size() > 1) uids += ',';
      uids += recordUid(r);
    }
    uids += '}';
    PGresult* res = PQexecParams(conn_,
                                 (std::string("SELECT ") + kUidColumn + " FROM " + kHistoryTable +
                                  " WHERE " + kUidColumn + " = ANY($1::text[])")
                                     .c_str(),
                                 1, nullptr, std::array<const char*, 1>{uids.c_str()}.data(),
                                 nullptr, nullptr, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
      WriteResult out = classify(res, "skipping stored records");
      PQclear(res);
      return out;
    }
    std::unordered_set<std::string> stored;
    for (int i = 0; i < PQntuples(res); ++i) stored.insert(PQgetvalue(res, i, 0));
    PQclear(res);
    buffer_.clear();
    for (const Record& r : records) {
      if (r.spool_seq == 0 || stored.count(recordUid(r)) == 0) appendRow(r);
    }
    if (!chain_error_.empty()) return {WriteOutcome::kRetry, chain_error_};
    if (buffer_.empty()) return {};
    bool conflict = false;
    return copyIn(copy_sql_, &conflict);
  }

  Result<ChainTail> chainTail(std::string_view instance) {
    const std::string inst(instance);
    const char* params[] = {inst.c_str()};
    PGresult* res =
        PQexecParams(conn_,
                     (std::string("SELECT chain_seq, chain_key, chain_hash FROM ") + kHistoryTable +
                      " WHERE instance_id = $1 AND chain_seq > 0 ORDER BY id DESC LIMIT 1")
                         .c_str(),
                     1, nullptr, params, nullptr, nullptr, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
      std::string msg = resultError(res, conn_);
      PQclear(res);
      return Result<ChainTail>::fail(msg);
    }
    ChainTail tail;
    if (PQntuples(res) == 1) {
      tail.seq = std::strtoull(PQgetvalue(res, 0, 0), nullptr, 10);
      tail.key_id = PQgetvalue(res, 0, 1);
      if (!parseChainHash(PQgetvalue(res, 0, 2), &tail.hash)) tail.hash = {};
    }
    PQclear(res);
    return tail;
  }

  WriteResult step(const std::string& sql) {
    PGresult* res = PQexec(conn_, sql.c_str());
    const auto st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      PQclear(res);
      return {};
    }
    WriteResult out = classify(res, "skipping stored records");
    PQclear(res);
    return out;
  }

  Status ensureSchema() {
    if (auto n = exec("BEGIN", {}); !n.ok()) return Status::fail(n.error());
    auto run = [&]() -> Status {
      if (auto n = exec(std::string("SELECT pg_advisory_xact_lock(") + kSchemaLockKey + ")", {});
          !n.ok()) {
        return Status::fail(n.error());
      }
      for (const auto& sql : schemaStatements(Dialect::kPostgres)) {
        if (auto n = exec(sql, {}); !n.ok()) return Status::fail(n.error());
      }
      PGresult* res =
          PQexec(conn_, (std::string("SELECT max(version) FROM ") + kSchemaTable).c_str());
      if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        std::string msg = resultError(res, conn_);
        PQclear(res);
        return Status::fail(msg);
      }
      const int version = PQgetisnull(res, 0, 0) ? 0 : std::atoi(PQgetvalue(res, 0, 0));
      PQclear(res);
      if (version > kSchemaVersion) {
        return Status::fail("history schema version " + std::to_string(version) +
                            " is newer than this pgwarden's (" + std::to_string(kSchemaVersion) +
                            ")");
      }
      return {};
    };
    Status s = run();
    if (!s.ok()) {
      (void)exec("ROLLBACK", {});
      return s;
    }
    if (auto n = exec("COMMIT", {}); !n.ok()) return Status::fail(n.error());
    return {};
  }

  // Runs one statement with text parameters; returns the affected row count.
  Result<int64_t> exec(const std::string& sql, std::initializer_list<std::string> params) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                 values.data(), nullptr, nullptr, 0);
    const auto st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      std::string msg = resultError(res, conn_);
      PQclear(res);
      if (PQstatus(conn_) != CONNECTION_OK) disconnect();
      return Result<int64_t>::fail(msg);
    }
    const char* n = PQcmdTuples(res);
    const int64_t count = (n != nullptr && *n != '\0') ? std::atoll(n) : 0;
    PQclear(res);
    return count;
  }

  WriteResult classify(const PGresult* res, const char* what) {
    WriteResult out{WriteOutcome::kRetry, std::string(what) + ": " + resultError(res, conn_)};
    if (PQstatus(conn_) != CONNECTION_OK) return out;
    const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    // Data exceptions, integrity violations and program limits: this data will never go in.
    if (state != nullptr && (std::strncmp(state, "22", 2) == 0 ||
                             std::strncmp(state, "23", 2) == 0 ||
                             std::strncmp(state, "54", 2) == 0)) {
      out.outcome = WriteOutcome::kRejected;
    }
    return out;
  }

  // Anything but a data error makes write() start over on a fresh connection (which also
  // re-creates the table if someone dropped it).
  WriteResult failed(PGresult* res, const char* what) {
    WriteResult out = classify(res, what);
    PQclear(res);
    return out;
  }

  void appendRow(const Record& r) {
    row_.assign(r);
    if (chain_ && chain_error_.empty()) {
      if (auto s = chain_->link(row_, [this](std::string_view i) { return chainTail(i); });
          !s.ok()) {
        chain_error_ = s.error();
      }
    }
    bool first = true;
    for (const Value& v : row_.values()) {
      if (!first) buffer_.push_back('\t');
      first = false;
      switch (v.type) {
        case ColumnType::kTimestamp: buffer_ += v.text; break;
        case ColumnType::kInt: buffer_ += std::to_string(v.i); break;
        case ColumnType::kBool: buffer_.push_back(v.i != 0 ? 't' : 'f'); break;
        case ColumnType::kText:
        case ColumnType::kJson: appendCopyText(buffer_, v.text); break;
        case ColumnType::kUid:
          if (v.text.empty()) {
            buffer_ += "\\N";
          } else {
            appendCopyText(buffer_, v.text);
          }
          break;
      }
    }
    buffer_.push_back('\n');
  }

  void disconnect() {
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = nullptr;
  }

  std::string dsn_;
  std::string copy_sql_;
  std::string buffer_;
  RowValues row_;  // reused for every row
  std::string chain_error_;  // why linking a record of this batch failed
  PGconn* conn_ = nullptr;
  bool outage_ = false;  // the last open failed only because the server could not be reached
};

}  // namespace

std::unique_ptr<Store> makePostgresStore(const std::string& dsn) {
  return std::make_unique<PostgresStore>(dsn);
}

}  // namespace pgwarden::history
