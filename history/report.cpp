// Reports over the history table. Each report is one SQL query written once, with the few
// dialect differences (placeholders, JSON array expansion, timestamp output) filled in per store.
#include "history/report.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <variant>

#include "common/config_env.h"
#include "common/config_util.h"
#include "history/json.h"
#include "history/recorder.h"
#include "history/text.h"

namespace pgwarden::history {

namespace {

constexpr const char* kDefaultConfig = "/etc/pgwarden/pgwarden.yaml";
constexpr const char* kDefaultSqlitePath = "/var/lib/pgwarden/history.db";
constexpr size_t kMaxCellChars = 60;  // text output only; --json keeps everything

std::string tsOut(Dialect d, const std::string& expr) {
  if (d == Dialect::kSqlite) return expr;  // stored as ISO-8601 UTC text already
  return "to_char(" + expr + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

// The records in scope, with the conversation key: conversation_id, or the session for clients
// that send none (psql, a script), so their retries are still seen.
std::string baseCte(bool with_since) {
  return std::string(
             "WITH h AS (\n"
             "  SELECT id, started_at, instance_id, session_id, agent_id, policy_group,\n"
             "         statement_kind, tables, sql_text, fingerprint, outcome, deny_code,\n"
             "         error_message, rows_returned, single_zero,\n"
             "         CASE WHEN conversation_id <> '' THEN conversation_id\n"
             "              ELSE 'session:' || instance_id || ':' || CAST(session_id AS TEXT)\n"
             "         END AS conv\n"
             "  FROM ") +
         kHistoryTable + (with_since ? "\n  WHERE started_at >= ?" : "") + "\n)";
}

constexpr const char* kDenied = "outcome IN ('denied', 'budget')";
constexpr const char* kZero =
    "outcome = 'ok' AND (single_zero = TRUE OR (rows_returned = 0 AND statement_kind = 'select'))";

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

using Param = std::variant<int64_t, std::string>;

class Reader {
 public:
  virtual ~Reader() = default;
  virtual Result<ReportTable> query(const std::string& sql, const std::vector<Param>& params) = 0;
};

class SqliteReader final : public Reader {
 public:
  ~SqliteReader() override { sqlite3_close_v2(db_); }

  Status open(const std::string& path) {
    if (!std::filesystem::exists(path)) return Status::fail(path + ": no such file");
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr);
    if (rc != SQLITE_OK) return Status::fail(path + ": " + sqlite3_errstr(rc));
    sqlite3_busy_timeout(db_, 5000);
    auto t = query(std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                               "name = '") + kHistoryTable + "'",
                   {});
    if (!t.ok()) return Status::fail(path + ": " + t.error());
    if (t->rows.empty() || t->rows[0][0].text == "0") {
      return Status::fail(path + ": no history table (" + kHistoryTable + ") in this file");
    }
    return {};
  }

  Result<ReportTable> query(const std::string& sql, const std::vector<Param>& params) override {
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

class PostgresReader final : public Reader {
 public:
  ~PostgresReader() override {
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
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    auto t = query(std::string("SELECT to_regclass('") + kHistoryTable + "') IS NOT NULL", {});
    if (!t.ok()) return Status::fail(t.error());
    if (t->rows.empty() || t->rows[0][0].text != "t") {
      return Status::fail(std::string("no history table (") + kHistoryTable +
                          ") in this database");
    }
    return {};
  }

  Result<ReportTable> query(const std::string& sql, const std::vector<Param>& params) override {
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
    PGresult* res = PQexecParams(conn_, toDollarParams(sql).c_str(),
                                 static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                                 nullptr, 0);
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
        cell.numeric = type == 20 || type == 21 || type == 23 || type == 1700 || type == 700 ||
                       type == 701;
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
};

// Display width in characters, counting each code point once (good enough for a terminal table).
size_t displayWidth(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string displayCell(const ReportCell& cell) {
  if (cell.null) return "";
  std::string s = cell.text;
  sanitizeUtf8(s);
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (displayWidth(s) > kMaxCellChars) {
    // Cut after kMaxCellChars - 3 code points.
    size_t chars = 0;
    size_t i = 0;
    while (i < s.size() && chars < kMaxCellChars - 3) {
      i += std::max<size_t>(1, utf8SequenceLength(std::string_view(s).substr(i)));
      ++chars;
    }
    s.resize(i);
    s += "...";
  }
  return s;
}

bool looksNumeric(const std::string& s) {
  if (s.empty()) return false;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  bool dot = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '.' && !dot) {
      dot = true;
    } else if (s[i] < '0' || s[i] > '9') {
      return false;
    }
  }
  return s.back() != '.';
}

}  // namespace

const char* reportKindName(ReportKind kind) {
  switch (kind) {
    case ReportKind::kRetries: return "retries";
    case ReportKind::kRepeats: return "repeats";
    case ReportKind::kDenials: return "denials";
    case ReportKind::kZeros: return "zeros";
  }
  return "unknown";
}

bool parseReportKind(const std::string& name, ReportKind* out) {
  for (ReportKind k :
       {ReportKind::kRetries, ReportKind::kRepeats, ReportKind::kDenials, ReportKind::kZeros}) {
    if (name == reportKindName(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

std::string reportSql(ReportKind kind, Dialect d, bool with_since) {
  // Each report groups `r` (the records in scope, ranked newest first within their group, so
  // rn = 1 is the example / latest reason) and joins each group to its newest record.
  auto ranked = [](const std::string& from, const std::string& keys) {
    return ",\nr AS (\n  SELECT s.*, ROW_NUMBER() OVER (PARTITION BY " + keys +
           " ORDER BY started_at DESC, id DESC) AS rn\n  FROM " + from + "\n)";
  };
  std::string sql = baseCte(with_since);
  switch (kind) {
    case ReportKind::kRetries:
      sql += ranked("h s WHERE fingerprint <> ''", "conv, fingerprint") +
             ",\ng AS (\n"
             "  SELECT conv, fingerprint, MAX(agent_id) AS agent_id, COUNT(*) AS attempts,\n"
             "         COUNT(DISTINCT sql_text) AS variants,\n"
             "         SUM(CASE WHEN " + std::string(kDenied) + " THEN 1 ELSE 0 END) AS denials,\n"
             "         SUM(CASE WHEN outcome = 'error' THEN 1 ELSE 0 END) AS errors,\n"
             "         SUM(CASE WHEN " + kZero + " THEN 1 ELSE 0 END) AS zeros,\n"
             "         MAX(started_at) AS last_seen\n"
             "  FROM r\n"
             "  GROUP BY conv, fingerprint\n"
             "  HAVING COUNT(DISTINCT sql_text) >= ?\n"
             ")\n"
             "SELECT g.conv AS conversation, g.agent_id, g.fingerprint, g.attempts, g.variants,\n"
             "       g.denials, g.errors, g.zeros, " + tsOut(d, "g.last_seen") + " AS last_seen,\n"
             "       x.sql_text AS example\n"
             "FROM g JOIN r x ON x.conv = g.conv AND x.fingerprint = g.fingerprint AND x.rn = 1\n"
             "ORDER BY g.variants DESC, g.attempts DESC, g.last_seen DESC, g.conv\n"
             "LIMIT ?";
      break;
    case ReportKind::kRepeats:
      sql += ranked("h s WHERE fingerprint <> ''", "fingerprint") +
             ",\ng AS (\n"
             "  SELECT fingerprint, COUNT(DISTINCT conv) AS conversations,\n"
             "         COUNT(DISTINCT instance_id || ':' || CAST(session_id AS TEXT)) AS sessions,\n"
             "         COUNT(*) AS runs, COUNT(DISTINCT sql_text) AS texts,\n"
             "         SUM(CASE WHEN " + std::string(kDenied) + " THEN 1 ELSE 0 END) AS denials,\n"
             "         MAX(started_at) AS last_seen\n"
             "  FROM r\n"
             "  GROUP BY fingerprint\n"
             "  HAVING COUNT(DISTINCT conv) > 1\n"
             ")\n"
             "SELECT g.fingerprint, g.conversations, g.sessions, g.runs, g.texts, g.denials,\n"
             "       " + tsOut(d, "g.last_seen") + " AS last_seen,\n"
             "       CAST(x.tables AS TEXT) AS tables, x.sql_text AS example\n"
             "FROM g JOIN r x ON x.fingerprint = g.fingerprint AND x.rn = 1\n"
             "ORDER BY g.conversations DESC, g.runs DESC, g.last_seen DESC, g.fingerprint\n"
             "LIMIT ?";
      break;
    case ReportKind::kDenials:
      sql += ",\nd AS (\n"
             "  SELECT h.id, h.conv, h.deny_code, h.policy_group, h.started_at, h.error_message,\n"
             "         COALESCE(tb.value, '') AS table_name\n"
             "  FROM h " +
             std::string(d == Dialect::kSqlite
                             ? "LEFT JOIN json_each(h.tables) AS tb"
                             : "LEFT JOIN LATERAL jsonb_array_elements_text(h.tables) AS tb(value) "
                               "ON TRUE") +
             "\n  WHERE h." + kDenied + "\n)" +
             ranked("d s", "deny_code, table_name, policy_group") +
             ",\ng AS (\n"
             "  SELECT deny_code, table_name, policy_group, COUNT(*) AS denials,\n"
             "         COUNT(DISTINCT conv) AS conversations, MAX(started_at) AS last_seen\n"
             "  FROM r GROUP BY deny_code, table_name, policy_group\n"
             ")\n"
             "SELECT g.deny_code, g.table_name, g.policy_group, g.denials, g.conversations,\n"
             "       " + tsOut(d, "g.last_seen") + " AS last_seen, x.error_message AS latest_reason\n"
             "FROM g JOIN r x ON x.deny_code = g.deny_code AND x.table_name = g.table_name\n"
             "             AND x.policy_group = g.policy_group AND x.rn = 1\n"
             "ORDER BY g.denials DESC, g.deny_code, g.table_name, g.policy_group\n"
             "LIMIT ?";
      break;
    case ReportKind::kZeros:
      sql += ranked("h s WHERE " + std::string(kZero), "conv, fingerprint") +
             ",\ng AS (\n"
             "  SELECT conv, fingerprint, MAX(agent_id) AS agent_id, COUNT(*) AS results,\n"
             "         SUM(CASE WHEN single_zero = TRUE THEN 0 ELSE 1 END) AS empty_results,\n"
             "         SUM(CASE WHEN single_zero = TRUE THEN 1 ELSE 0 END) AS zero_counts,\n"
             "         COUNT(DISTINCT sql_text) AS texts, MAX(started_at) AS last_seen\n"
             "  FROM r\n"
             "  GROUP BY conv, fingerprint\n"
             ")\n"
             "SELECT g.conv AS conversation, g.agent_id, g.fingerprint, g.results,\n"
             "       g.empty_results, g.zero_counts, g.texts,\n"
             "       " + tsOut(d, "g.last_seen") + " AS last_seen, x.sql_text AS example\n"
             "FROM g JOIN r x ON x.conv = g.conv AND x.fingerprint = g.fingerprint AND x.rn = 1\n"
             "ORDER BY g.results DESC, g.last_seen DESC, g.conv\n"
             "LIMIT ?";
      break;
  }
  return sql;
}

Result<ReportTable> runReport(const ReportOptions& o) {
  const bool with_since = o.since.count() > 0;
  std::vector<Param> params;
  if (with_since) {
    int64_t now_us = o.now_us;
    if (now_us == 0) {
      now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    }
    const int64_t since_us =
        std::chrono::duration_cast<std::chrono::microseconds>(o.since).count();
    params.emplace_back(formatTimestampUs(now_us - since_us));
  }
  if (o.kind == ReportKind::kRetries) params.emplace_back(o.min_variants);
  params.emplace_back(o.limit);

  if (o.store == "sqlite") {
    SqliteReader reader;
    if (auto s = reader.open(o.target); !s.ok()) return Result<ReportTable>::fail(s.error());
    return reader.query(reportSql(o.kind, Dialect::kSqlite, with_since), params);
  }
  if (o.store == "postgres") {
    PostgresReader reader;
    if (auto s = reader.open(o.target); !s.ok()) return Result<ReportTable>::fail(s.error());
    return reader.query(reportSql(o.kind, Dialect::kPostgres, with_since), params);
  }
  return Result<ReportTable>::fail("reports read a sqlite or postgres store, not '" + o.store +
                                   "'");
}

std::string formatReportText(const ReportTable& table) {
  const size_t ncol = table.columns.size();
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width(ncol);
  std::vector<bool> numeric(ncol, true);
  for (size_t c = 0; c < ncol; ++c) width[c] = displayWidth(table.columns[c]);
  for (const auto& row : table.rows) {
    std::vector<std::string> out;
    for (size_t c = 0; c < ncol && c < row.size(); ++c) {
      out.push_back(displayCell(row[c]));
      width[c] = std::max(width[c], displayWidth(out.back()));
      if (!row[c].numeric && !row[c].null) numeric[c] = false;
    }
    cells.push_back(std::move(out));
  }
  if (table.rows.empty()) numeric.assign(ncol, false);
  auto pad = [](std::string& line, const std::string& s, size_t w, bool right) {
    const size_t fill = w - std::min(w, displayWidth(s));
    if (right) line.append(fill, ' ');
    line += s;
    if (!right) line.append(fill, ' ');
  };
  std::string out;
  std::string line;
  for (size_t c = 0; c < ncol; ++c) {
    if (c > 0) line += "  ";
    pad(line, table.columns[c], width[c], numeric[c]);
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out += line + "\n";
  line.clear();
  for (size_t c = 0; c < ncol; ++c) {
    if (c > 0) line += "  ";
    line.append(width[c], '-');
  }
  out += line + "\n";
  for (const auto& row : cells) {
    line.clear();
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      pad(line, row[c], width[c], numeric[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += "(" + std::to_string(table.rows.size()) +
         (table.rows.size() == 1 ? " row)\n" : " rows)\n");
  return out;
}

std::string formatReportJson(ReportKind kind, const ReportTable& table) {
  JsonWriter w;
  w.beginObject().key("report").string(reportKindName(kind)).key("rows").beginArray();
  for (const auto& row : table.rows) {
    w.beginObject();
    for (size_t c = 0; c < table.columns.size() && c < row.size(); ++c) {
      w.key(table.columns[c]);
      const ReportCell& cell = row[c];
      if (cell.null) {
        w.null();
      } else if (cell.numeric && looksNumeric(cell.text)) {
        w.raw(cell.text);
      } else {
        w.string(cell.text);
      }
    }
    w.endObject();
  }
  w.endArray().endObject();
  return w.take() + "\n";
}

bool parseReportStore(const std::string& text, std::string* store, std::string* target) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return false;
  *store = text.substr(0, colon);
  *target = text.substr(colon + 1);
  return (*store == "sqlite" || *store == "postgres") && !target->empty();
}

int runReportCommand(const ReportRequest& request, std::ostream& out, std::ostream& err) {
  ReportOptions o = request.options;
  if (!request.store.empty()) {
    if (!parseReportStore(request.store, &o.store, &o.target)) {
      err << "pgwarden report: --store needs sqlite:PATH or postgres:DSN\n";
      return 2;
    }
  } else {
    const bool explicit_config = !request.config_file.empty();
    const std::string config_file = explicit_config ? request.config_file : kDefaultConfig;
    if (!explicit_config && !std::filesystem::exists(config_file)) {
      err << "pgwarden report: give --store, or --config with a history section\n";
      return 2;
    }
    try {
      YAML::Node root = YAML::LoadFile(config_file);
      config::interpolateEnv(root);
      const HistoryConfig hc = parseHistoryConfig(root["history"], kDefaultSqlitePath);
      if (hc.store != "sqlite" && hc.store != "postgres") {
        err << "pgwarden report: " << config_file << ": history.store is " << hc.store
            << "; reports read a sqlite or postgres store (use --store)\n";
        return 1;
      }
      o.store = hc.store;
      o.target = hc.store == "sqlite" ? hc.path : hc.dsn;
    } catch (const config::ConfigError& e) {
      err << "pgwarden report: " << config_file << ":" << e.line() << ": " << e.key() << ": "
          << e.what() << "\n";
      return 1;
    } catch (const YAML::Exception& e) {
      err << "pgwarden report: " << config_file << ": " << e.what() << "\n";
      return 1;
    }
  }

  auto table = runReport(o);
  if (!table.ok()) {
    err << "pgwarden report: " << o.store << " store: " << table.error() << "\n";
    return 1;
  }
  out << (request.json ? formatReportJson(o.kind, *table) : formatReportText(*table));
  return 0;
}

}  // namespace pgwarden::history
