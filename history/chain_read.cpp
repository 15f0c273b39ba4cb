// Reads a store's records back for the chain's verify and export, each field in the canonical
// text the writer hashed (chain.h): SQLite and PostgreSQL by row id, a JSON-lines file by line.
#include <libpq-fe.h>
#include <sqlite3.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "history/json.h"
#include "history/schema.h"
#include "history/text.h"
#include "history/verify.h"

namespace pgwarden::history {

namespace {

// A column read as text (or NULL) made canonical for its type.
void canonicalFromText(ColumnType type, const char* text, size_t n, std::string& out) {
  if (text == nullptr) {
    out.clear();
    return;
  }
  const std::string_view v(text, n);
  switch (type) {
    case ColumnType::kJson:
      out = canonicalJson(v);
      return;
    case ColumnType::kBool:
      out = (v == "t" || v == "true" || v == "1") ? "1" : "0";
      return;
    case ColumnType::kTimestamp:
    case ColumnType::kInt:
    case ColumnType::kText:
    case ColumnType::kUid:
      out.assign(v);
      return;
  }
}

std::string sinceClause(const char* placeholder) {
  const std::string t = kHistoryTable;
  return " WHERE id >= (SELECT min(id) FROM " + t + " WHERE started_at >= " + placeholder + ")";
}

}  // namespace

Status readSqliteRows(const std::string& path, int64_t since_us, const RowSink& sink) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, decltype(&sqlite3_close_v2)> db(raw, sqlite3_close_v2);
  if (rc != SQLITE_OK) return Status::fail(path + ": " + sqlite3_errstr(rc));
  sqlite3_busy_timeout(raw, 5000);
  const std::string sql = "SELECT id, " + columnList() + " FROM " + kHistoryTable +
                          (since_us > 0 ? sinceClause("?1") : std::string()) + " ORDER BY id";
  sqlite3_stmt* st_raw = nullptr;
  rc = sqlite3_prepare_v2(raw, sql.c_str(), -1, &st_raw, nullptr);
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> st(st_raw, sqlite3_finalize);
  if (rc != SQLITE_OK) return Status::fail(path + ": " + sqlite3_errmsg(raw));
  const std::string since = since_us > 0 ? formatTimestampUs(since_us) : std::string();
  if (since_us > 0) sqlite3_bind_text(st_raw, 1, since.c_str(), -1, SQLITE_STATIC);
  StoredRow row;
  while ((rc = sqlite3_step(st_raw)) == SQLITE_ROW) {
    row.id = sqlite3_column_int64(st_raw, 0);
    for (size_t i = 0; i < kColumns.size(); ++i) {
      const int col = static_cast<int>(i) + 1;
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(st_raw, col));
      canonicalFromText(kColumns[i].type, text,
                        static_cast<size_t>(sqlite3_column_bytes(st_raw, col)), row.fields[i]);
    }
    sink(row);
  }
  if (rc != SQLITE_DONE) return Status::fail(path + ": " + sqlite3_errmsg(raw));
  return {};
}

Status readPostgresRows(const std::string& dsn, int64_t since_us, const RowSink& sink) {
  const char* keys[] = {"connect_timeout", "application_name", "dbname", "client_encoding",
                        nullptr};
  const char* values[] = {"10", "pgwarden-history-verify", dsn.c_str(), "UTF8", nullptr};
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdbParams(keys, values, 1), PQfinish);
  if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
    return Status::fail(conn ? PQerrorMessage(conn.get()) : "out of memory");
  }
  std::string cols;
  for (const auto& c : kColumns) {
    cols += ", ";
    switch (c.type) {
      case ColumnType::kTimestamp:
        cols += std::string("to_char(") + c.name +
                " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
        break;
      case ColumnType::kBool:
        cols += std::string(c.name) + "::int";
        break;
      case ColumnType::kJson:
        cols += std::string(c.name) + "::text";
        break;
      case ColumnType::kInt:
      case ColumnType::kText:
      case ColumnType::kUid:
        cols += c.name;
        break;
    }
  }
  const std::string since = since_us > 0 ? formatTimestampUs(since_us) : std::string();
  const std::string sql = "SELECT id" + cols + " FROM " + kHistoryTable +
                          (since_us > 0 ? sinceClause("$1::timestamptz") : std::string()) +
                          " ORDER BY id";
  const char* params[] = {since.c_str()};
  if (PQsendQueryParams(conn.get(), sql.c_str(), since_us > 0 ? 1 : 0, nullptr, params, nullptr,
                        nullptr, 0) != 1 ||
      PQsetSingleRowMode(conn.get()) != 1) {
    return Status::fail(PQerrorMessage(conn.get()));
  }
  StoredRow row;
  std::string error;
  while (PGresult* res = PQgetResult(conn.get())) {
    const auto status = PQresultStatus(res);
    if (status == PGRES_SINGLE_TUPLE) {
      row.id = std::stoll(PQgetvalue(res, 0, 0));
      for (size_t i = 0; i < kColumns.size(); ++i) {
        const int col = static_cast<int>(i) + 1;
        const bool null = PQgetisnull(res, 0, col) != 0;
        canonicalFromText(kColumns[i].type, null ? nullptr : PQgetvalue(res, 0, col),
                          static_cast<size_t>(PQgetlength(res, 0, col)), row.fields[i]);
      }
      sink(row);
    } else if (status != PGRES_TUPLES_OK && error.empty()) {
      error = PQresultErrorMessage(res);
    }
    PQclear(res);
  }
  if (!error.empty()) return Status::fail(error);
  return {};
}

Status readJsonlRows(const std::string& path, int64_t since_us, const RowSink& sink) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::fail("cannot read " + path);
  const std::string since = since_us > 0 ? formatTimestampUs(since_us) : std::string();
  bool started = since_us == 0;
  std::string line;
  StoredRow row;
  while (std::getline(in, line)) {
    ++row.id;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    row.unreadable = j.is_discarded() || !j.is_object();
    for (size_t i = 0; i < kColumns.size() && !row.unreadable; ++i) {
      std::string& f = row.fields[i];
      const auto it = j.find(kColumns[i].name);
      if (it == j.end() || it->is_null()) {
        f.clear();
      } else if (kColumns[i].type == ColumnType::kJson) {
        f = it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      } else if (it->is_string()) {
        f = it->get<std::string>();
      } else if (it->is_boolean()) {
        f = it->get<bool>() ? "1" : "0";
      } else if (it->is_number_integer()) {
        f = std::to_string(it->get<int64_t>());
      } else {
        f = it->dump();
      }
    }
    if (!started) {
      if (row.unreadable || row.fields[kStartedAtField] < since) continue;
      started = true;
    }
    sink(row);
  }
  return {};
}

Status readStoredRows(const HistoryConfig& config, int64_t since_us, const RowSink& sink) {
  if (config.store == "sqlite") return readSqliteRows(config.path, since_us, sink);
  if (config.store == "jsonl") return readJsonlRows(config.path, since_us, sink);
  if (config.store == "postgres") return readPostgresRows(config.dsn, since_us, sink);
  return Status::fail("history.store is " + config.store + ": there is nothing to read");
}

std::string jsonLine(const StoredRow& row) {
  JsonWriter w;
  w.beginObject();
  for (size_t i = 0; i < kColumns.size(); ++i) {
    const std::string& f = row.fields[i];
    w.key(kColumns[i].name);
    switch (kColumns[i].type) {
      case ColumnType::kInt:
        w.number(f.empty() ? 0 : std::stoll(f));
        break;
      case ColumnType::kBool:
        w.boolean(f == "1");
        break;
      case ColumnType::kJson:
        if (isJsonValue(f)) {
          w.raw(f);
        } else {
          w.string(f);
        }
        break;
      case ColumnType::kUid:
        if (f.empty()) {
          w.null();
        } else {
          w.string(f);
        }
        break;
      case ColumnType::kTimestamp:
      case ColumnType::kText:
        w.string(f);
        break;
    }
  }
  w.endObject();
  return w.take();
}

}  // namespace pgwarden::history
