// Reports over the history table. Each report is one SQL query written once, with the few
// dialect differences (placeholders, JSON array expansion, timestamp output) filled in per store.
#include "history/report.h"

#include <yaml-cpp/yaml.h>

#include <cstring>
#include <filesystem>
#include <future>
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

std::string tsOut(Dialect d, const std::string& expr) {
  if (d == Dialect::kSqlite) return expr;  // stored as ISO-8601 UTC text already
  return "to_char(" + expr + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

// The conversation a record belongs to: its conversation_id, or its session for a client that
// sends none. `p`: the table's alias and a dot, or "".
std::string conversationKey(const std::string& p) {
  return "CASE WHEN " + p + "conversation_id <> '' THEN " + p +
         "conversation_id ELSE 'session:' || " + p + "instance_id || ':' || CAST(" + p +
         "session_id AS TEXT) END";
}

// The records in scope, with the conversation key: conversation_id, or the session for clients
// that send none (psql, a script), so their retries are still seen.
std::string baseCte(bool with_since) {
  return std::string(
             "WITH h AS (\n"
             "  SELECT id, started_at, instance_id, session_id, agent_id, policy_group,\n"
             "         statement_kind, tables, sql_text, fingerprint, outcome, deny_code,\n"
             "         error_message, rows_returned, single_zero,\n"
             "         ") +
         conversationKey("") + " AS conv\n  FROM " + kHistoryTable +
         (with_since ? "\n  WHERE started_at >= ?" : "") + "\n)";
}

constexpr const char* kDenied = "outcome IN ('denied', 'budget')";
constexpr const char* kZero =
    "outcome = 'ok' AND (single_zero = TRUE OR (rows_returned = 0 AND statement_kind = 'select'))";

}  // namespace

const char* reportKindName(ReportKind kind) {
  switch (kind) {
    case ReportKind::kRetries: return "retries";
    case ReportKind::kRepeats: return "repeats";
    case ReportKind::kDenials: return "denials";
    case ReportKind::kZeros: return "zeros";
    case ReportKind::kConversation:
      return "conversation";
  }
  return "unknown";
}

bool parseReportKind(const std::string& name, ReportKind* out) {
  for (ReportKind k : {ReportKind::kRetries, ReportKind::kRepeats, ReportKind::kDenials,
                       ReportKind::kZeros, ReportKind::kConversation}) {
    if (name == reportKindName(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

std::string conversationCondition(const std::string& key, std::vector<ReportParam>* params) {
  // "session:INSTANCE:SESSION": the records of a session that sent no conversation_id. The
  // instance id holds no ':' (a hostname and a number), so the last ':' ends it.
  constexpr std::string_view kSession = "session:";
  if (key.rfind(kSession, 0) == 0) {
    const auto colon = key.rfind(':');
    const std::string instance = key.substr(kSession.size(), colon - kSession.size());
    const std::string number = key.substr(colon + 1);
    char* end = nullptr;
    const long long id = std::strtoll(number.c_str(), &end, 10);
    if (colon > kSession.size() && !number.empty() && end != nullptr && *end == '\0') {
      params->emplace_back(instance);
      params->emplace_back(static_cast<int64_t>(id));
      return "conversation_id = '' AND instance_id = ? AND session_id = ?";
    }
  }
  params->emplace_back(key);
  return "conversation_id = ?";
}

namespace {

// One conversation's records in order: the timeline. The result screens' codes come out of
// guard_actions (their entries are {"guard":"result_screen","code":...}).
std::string conversationSql(Dialect d, bool with_since, bool session_key) {
  const bool pg = d == Dialect::kPostgres;
  std::vector<ReportParam> ignored;
  const std::string where = conversationCondition(session_key ? "session:i:1" : "c", &ignored);
  const std::string codes =
      pg ? "(SELECT string_agg(a->>'code', ' ') FROM jsonb_array_elements(guard_actions) a "
           "WHERE a->>'guard' = 'result_screen')"
         : "(SELECT group_concat(json_extract(a.value, '$.code'), ' ') FROM "
           "json_each(guard_actions) a WHERE json_extract(a.value, '$.guard') = 'result_screen')";
  return std::string("SELECT ROW_NUMBER() OVER (ORDER BY started_at, id) AS n, ") +
         tsOut(d, "started_at") +
         " AS started_at, agent_id, outcome, deny_code,\n"
         "       COALESCE(" +
         codes +
         ", '') AS warning_codes, rows_returned,\n"
         "       round(duration_us / 1000.0, 3) AS duration_ms, host, tool_name, sql_text, "
         "error_message\n"
         "FROM " +
         kHistoryTable + "\nWHERE " + where + (with_since ? " AND started_at >= ?" : "") +
         "\nORDER BY started_at, id\nLIMIT ?";
}

// The id of a group's newest record (the newest started_at, then the highest id: the order the
// reports' examples follow), found through the started_at index among the few records that
// started at the group's last_seen, rather than by ranking every record in the range.
// `only`: a condition on the record (its columns unqualified) the group's records all meet.
std::string newestOf(bool by_conversation, const char* only = nullptr) {
  return std::string("(SELECT MAX(y.id) FROM ") + kHistoryTable +
         " y WHERE y.started_at = g.last_seen AND y.fingerprint = g.fingerprint" +
         (by_conversation ? " AND " + conversationKey("y.") + " = g.conv" : "") +
         (only != nullptr ? std::string(" AND ") + only : std::string()) + ")";
}

}  // namespace

std::string reportSql(ReportKind kind, Dialect d, bool with_since, bool session_key) {
  if (kind == ReportKind::kConversation) return conversationSql(d, with_since, session_key);
  // Each report groups `r` (the records in scope, ranked newest first within their group, so
  // rn = 1 is the example / latest reason) and joins each group to its newest record.
  auto ranked = [](const std::string& from, const std::string& keys) {
    return ",\nr AS (\n  SELECT s.*, ROW_NUMBER() OVER (PARTITION BY " + keys +
           " ORDER BY started_at DESC, id DESC) AS rn\n  FROM " + from + "\n)";
  };
  std::string sql = baseCte(with_since);
  switch (kind) {
    case ReportKind::kRetries:
      sql += ",\ng AS (\n"
             "  SELECT conv, fingerprint, MAX(agent_id) AS agent_id, COUNT(*) AS attempts,\n"
             "         COUNT(DISTINCT sql_text) AS variants,\n"
             "         SUM(CASE WHEN " + std::string(kDenied) + " THEN 1 ELSE 0 END) AS denials,\n"
             "         SUM(CASE WHEN outcome = 'error' THEN 1 ELSE 0 END) AS errors,\n"
             "         SUM(CASE WHEN " + kZero + " THEN 1 ELSE 0 END) AS zeros,\n"
             "         MAX(started_at) AS last_seen\n"
             "  FROM h WHERE fingerprint <> ''\n"
             "  GROUP BY conv, fingerprint\n"
             "  HAVING COUNT(DISTINCT sql_text) >= ?\n"
             "  ORDER BY variants DESC, attempts DESC, last_seen DESC, conv\n"
             "  LIMIT ?\n"
             ")\n"
             "SELECT g.conv AS conversation, g.agent_id, g.fingerprint, g.attempts, g.variants,\n"
             "       g.denials, g.errors, g.zeros, " + tsOut(d, "g.last_seen") + " AS last_seen,\n"
             "       x.sql_text AS example\n"
             "FROM g JOIN " + kHistoryTable + " x ON x.id = " + newestOf(true) + "\n"
             "ORDER BY g.variants DESC, g.attempts DESC, g.last_seen DESC, g.conv";
      break;
    case ReportKind::kRepeats:
      // Grouped by an expression, not the column: grouping by the column, SQLite read the whole
      // store in the fingerprint index's order (to skip a sort) instead of the time range.
      sql += ",\ng AS (\n"
             "  SELECT fingerprint || '' AS fingerprint, COUNT(DISTINCT conv) AS conversations,\n"
             "         COUNT(DISTINCT instance_id || ':' || CAST(session_id AS TEXT)) AS sessions,\n"
             "         COUNT(*) AS runs, COUNT(DISTINCT sql_text) AS texts,\n"
             "         SUM(CASE WHEN " + std::string(kDenied) + " THEN 1 ELSE 0 END) AS denials,\n"
             "         MAX(started_at) AS last_seen\n"
             "  FROM h WHERE fingerprint <> ''\n"
             "  GROUP BY fingerprint || ''\n"
             "  HAVING COUNT(DISTINCT conv) > 1\n"
             "  ORDER BY conversations DESC, runs DESC, last_seen DESC, fingerprint\n"
             "  LIMIT ?\n"
             ")\n"
             "SELECT g.fingerprint, g.conversations, g.sessions, g.runs, g.texts, g.denials,\n"
             "       " + tsOut(d, "g.last_seen") + " AS last_seen,\n"
             "       CAST(x.tables AS TEXT) AS tables, x.sql_text AS example\n"
             "FROM g JOIN " + kHistoryTable + " x ON x.id = " + newestOf(false) + "\n"
             "ORDER BY g.conversations DESC, g.runs DESC, g.last_seen DESC, g.fingerprint";
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
      sql += ",\ng AS (\n"
             "  SELECT conv, fingerprint, MAX(agent_id) AS agent_id, COUNT(*) AS results,\n"
             "         SUM(CASE WHEN single_zero = TRUE THEN 0 ELSE 1 END) AS empty_results,\n"
             "         SUM(CASE WHEN single_zero = TRUE THEN 1 ELSE 0 END) AS zero_counts,\n"
             "         COUNT(DISTINCT sql_text) AS texts, MAX(started_at) AS last_seen\n"
             "  FROM h WHERE " + std::string(kZero) + "\n"
             "  GROUP BY conv, fingerprint\n"
             "  ORDER BY results DESC, last_seen DESC, conv\n"
             "  LIMIT ?\n"
             ")\n"
             "SELECT g.conv AS conversation, g.agent_id, g.fingerprint, g.results,\n"
             "       g.empty_results, g.zero_counts, g.texts,\n"
             "       " + tsOut(d, "g.last_seen") + " AS last_seen, x.sql_text AS example\n"
             "FROM g JOIN " + kHistoryTable + " x ON x.id = " + newestOf(true, kZero) + "\n"
             "ORDER BY g.results DESC, g.last_seen DESC, g.conv";
      break;
    case ReportKind::kConversation:
      break;  // returned above
  }
  return sql;
}

std::vector<ReportParam> reportParams(const ReportOptions& o) {
  std::vector<ReportParam> params;
  if (o.kind == ReportKind::kConversation) conversationCondition(o.conversation, &params);
  if (o.since.count() > 0) {
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
  return params;
}

std::string reportSqlFor(const ReportOptions& o, Dialect d) {
  std::vector<ReportParam> key;
  const bool session_key =
      o.kind == ReportKind::kConversation &&
      conversationCondition(o.conversation, &key).find("session_id") != std::string::npos;
  return reportSql(o.kind, d, o.since.count() > 0, session_key);
}

Result<ReportTable> runReport(ReportReader& reader, const ReportOptions& o) {
  return reader.query(reportSqlFor(o, reader.dialect()), reportParams(o));
}

Result<ReportTable> runReport(const ReportOptions& o) {
  auto reader = openReportReader(o.store, o.target);
  if (!reader.ok()) return Result<ReportTable>::fail(reader.error());
  return runReport(**reader, o);
}

bool parseReportStore(const std::string& text, std::string* store, std::string* target) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return false;
  *store = text.substr(0, colon);
  *target = text.substr(colon + 1);
  return (*store == "sqlite" || *store == "postgres") && !target->empty();
}

namespace {

// Runs the report on a thread; while it runs past `after`, says so on `err` once a second.
Result<ReportTable> runWithProgress(const ReportOptions& o, std::chrono::milliseconds after,
                                    std::ostream& err) {
  const auto start = std::chrono::steady_clock::now();
  auto job = std::async(std::launch::async, [o] { return runReport(o); });
  std::chrono::milliseconds wait = after;
  bool said = false;
  while (job.wait_for(wait) != std::future_status::ready) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    err << "pgwarden report " << reportKindName(o.kind) << ": reading the " << o.store << " store, "
        << ms / 1000 << "." << (ms % 1000) / 100 << "s\n"
        << std::flush;
    said = true;
    wait = std::chrono::milliseconds(1000);
  }
  auto table = job.get();
  if (said) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    err << "pgwarden report " << reportKindName(o.kind) << ": done in " << ms / 1000 << "."
        << (ms % 1000) / 100 << "s\n";
  }
  return table;
}

}  // namespace

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

  auto table = runWithProgress(o, request.progress_after, err);
  if (!table.ok()) {
    err << "pgwarden report: " << o.store << " store: " << table.error() << "\n";
    return 1;
  }
  out << formatReport(request.format, reportKindName(o.kind), *table);
  return 0;
}

}  // namespace pgwarden::history
