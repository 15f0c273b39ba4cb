// The SQLite and PostgreSQL readers behind reports and the studio.
#include "history/report_reader.h"

#include <libpq-fe.h>
#include <sqlite3.h>

#include <filesystem>

namespace pgwarden::history {

int ReportTable::column(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string toDollarParams(const std::string& sql) {
  std::string out;
  int n = 0;
  bool in_string = false;
  for (char c : sql) {
    if (c == '\'') in_string = !in_string;
    if (c == '?' && !in_string) {
      out += "$" + std::to_string(++n);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace {

class SqliteReader final : public ReportReader {
 public:
  ~SqliteReader() override { sqlite3_close_v2(db_); }
  Dialect dialect() const override { return Dialect::kSqlite; }
  void interrupt() override { sqlite3_interrupt(db_); }

  Status open(const std::string& path) {
    if (!std::filesystem::exists(path)) return Status::fail(path + ": no such file");
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr);
    if (rc != SQLITE_OK) return Status::fail(path + ": " + sqlite3_errstr(rc));
    sqlite3_busy_timeout(db_, 5000);
    auto t = query(std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                               "name = '") +
                       kHistoryTable + "'",
                   {});
    if (!t.ok()) return Status::fail(path + ": " + t.error());
    if (t->rows.empty() || t->rows[0][0].text == "0") {
      return Status::fail(path + ": no history table (" + kHistoryTable + ") in this file");
    }
    // A file an older pgwarden wrote, not yet opened by this one's daemon: the columns added
    // since read as their defaults.
    auto cols =
        query(std::string("SELECT name FROM pragma_table_info('") + kHistoryTable + "')", {});
    if (!cols.ok()) return Status::fail(path + ": " + cols.error());
    std::vector<std::string> present;
    for (const auto& row : cols->rows) present.push_back(row[0].text);
    if (const std::string view = sqliteOlderTableView(present); !view.empty()) {
      char* err = nullptr;
      if (sqlite3_exec(db_, view.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        const std::string msg = err != nullptr ? err : "cannot read an older history table";
        sqlite3_free(err);
        return Status::fail(path + ": " + msg);
      }
    }
    return {};
  }

  Result<ReportTable> query(const std::string& sql,
                            const std::vector<ReportParam>& params) override {
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr);
    if (rc != SQLITE_OK) return Result<ReportTable>::fail(sqlite3_errmsg(db_));
    int idx = 1;
    for (const auto& p : params) {
      if (const auto* i = std::get_if<int64_t>(&p)) {
        sqlite3_bind_int64(st, idx++, *i);
      } else {
        const auto& s = std::get<std::string>(p);
        sqlite3_bind_text(st, idx++, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
    }
    ReportTable table;
    const int ncol = sqlite3_column_count(st);
    for (int c = 0; c < ncol; ++c) table.columns.emplace_back(sqlite3_column_name(st, c));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      std::vector<ReportCell> row;
      for (int c = 0; c < ncol; ++c) {
        ReportCell cell;
        const int type = sqlite3_column_type(st, c);
        cell.null = type == SQLITE_NULL;
        cell.numeric = type == SQLITE_INTEGER || type == SQLITE_FLOAT;
        const auto* text = sqlite3_column_text(st, c);
        if (text != nullptr) {
          cell.text.assign(reinterpret_cast<const char*>(text),
                           static_cast<size_t>(sqlite3_column_bytes(st, c)));
        }
        row.push_back(std::move(cell));
      }
      table.rows.push_back(std::move(row));
    }
    std::string err = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db_);
    sqlite3_finalize(st);
    if (!err.empty()) return Result<ReportTable>::fail(err);
    return table;
  }

 private:
  sqlite3* db_ = nullptr;
};

class PostgresReader final : public ReportReader {
 public:
  Dialect dialect() const override { return Dialect::kPostgres; }
  void interrupt() override {
    if (cancel_ == nullptr) return;
    char err[256];
    PQcancel(cancel_, err, sizeof err);
  }
  ~PostgresReader() override {
    if (cancel_ != nullptr) PQfreeCancel(cancel_);
    if (conn_ != nullptr) PQfinish(conn_);
  }

  Status open(const std::string& dsn) {
    const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {"10", "pgwarden-report", dsn.c_str(), nullptr};
    conn_ = PQconnectdbParams(keys, values, 1);
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = conn_ != nullptr ? PQerrorMessage(conn_) : "out of memory";
      while (!msg.empty() && msg.back() == '\n') msg.pop_back();
      return Status::fail(msg);
    }
    PQsetClientEncoding(conn_, "UTF8");
    cancel_ = PQgetCancel(conn_);
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
    auto t = query(std::string("SELECT to_regclass('") + kHistoryTable + "') IS NOT NULL", {});
    if (!t.ok()) return Status::fail(t.error());
    if (t->rows.empty() || t->rows[0][0].text != "t") {
      return Status::fail(std::string("no history table (") + kHistoryTable + ") in this database");
    }
    return {};
  }

  Result<ReportTable> query(const std::string& sql,
                            const std::vector<ReportParam>& params) override {
    std::vector<std::string> texts;
    for (const auto& p : params) {
      if (const auto* i = std::get_if<int64_t>(&p)) {
        texts.push_back(std::to_string(*i));
      } else {
        texts.push_back(std::get<std::string>(p));
      }
    }
    std::vector<const char*> values;
    for (const auto& t : texts) values.push_back(t.c_str());
    PGresult* res =
        PQexecParams(conn_, toDollarParams(sql).c_str(), static_cast<int>(values.size()), nullptr,
                     values.data(), nullptr, nullptr, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
      std::string msg = PQresultErrorMessage(res);
      while (!msg.empty() && msg.back() == '\n') msg.pop_back();
      PQclear(res);
      return Result<ReportTable>::fail(msg);
    }
    ReportTable table;
    const int ncol = PQnfields(res);
    for (int c = 0; c < ncol; ++c) table.columns.emplace_back(PQfname(res, c));
    for (int r = 0; r < PQntuples(res); ++r) {
      std::vector<ReportCell> row;
      for (int c = 0; c < ncol; ++c) {
        ReportCell cell;
        cell.null = PQgetisnull(res, r, c) != 0;
        const Oid type = PQftype(res, c);
        // int8, int2, int4, numeric, float4, float8
        cell.numeric =
            type == 20 || type == 21 || type == 23 || type == 1700 || type == 700 || type == 701;
        cell.text.assign(PQgetvalue(res, r, c), static_cast<size_t>(PQgetlength(res, r, c)));
        row.push_back(std::move(cell));
      }
      table.rows.push_back(std::move(row));
    }
    PQclear(res);
    return table;
  }

 private:
  PGconn* conn_ = nullptr;
  PGcancel* cancel_ = nullptr;  // made once: PQcancel may be called from another thread
};

}  // namespace

Result<std::unique_ptr<ReportReader>> openReportReader(const std::string& store,
                                                       const std::string& target) {
  using R = Result<std::unique_ptr<ReportReader>>;
  if (store == "sqlite") {
    auto reader = std::make_unique<SqliteReader>();
    if (auto s = reader->open(target); !s.ok()) return R::fail(s.error());
    return std::unique_ptr<ReportReader>(std::move(reader));
  }
  if (store == "postgres") {
    auto reader = std::make_unique<PostgresReader>();
    if (auto s = reader->open(target); !s.ok()) return R::fail(s.error());
    return std::unique_ptr<ReportReader>(std::move(reader));
  }
  return R::fail("reports read a sqlite or postgres store, not '" + store + "'");
}

}  // namespace pgwarden::history
