// The studio's SQL. Values are always bound parameters, never spliced into the text.
#include "studio/query.h"

#include "common/config_util.h"
#include "history/report.h"
#include "history/text.h"

namespace pgwarden::studio {

namespace {

using history::Dialect;

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string urlDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hexValue(s[i + 1]) >= 0 &&
               hexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(hexValue(s[i + 1]) * 16 + hexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool isCode(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

std::string ts(Dialect d, const std::string& expr) {
  if (d == Dialect::kSqlite) return expr;
  return "to_char(" + expr + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

constexpr const char* kConv =
    "CASE WHEN conversation_id <> '' THEN conversation_id ELSE 'session:' || instance_id || ':' "
    "|| CAST(session_id AS TEXT) END";
constexpr const char* kDenied = "outcome IN ('denied', 'budget')";
constexpr const char* kZero =
    "outcome = 'ok' AND (single_zero = TRUE OR (rows_returned = 0 AND statement_kind = 'select'))";

// "started_at >= ?" and the record-level filters, with their parameters.
std::string where(const Filter& f, int64_t now_us, std::vector<history::ReportParam>* params) {
  std::string w = "started_at >= ?";
  params->emplace_back(rangeStart(f, now_us));
  auto eq = [&](const char* column, const std::string& value) {
    if (value.empty()) return;
    w += std::string(" AND ") + column + " = ?";
    params->emplace_back(value);
  };
  eq("agent_id", f.agent);
  eq("user_name", f.user);
  eq("policy_group", f.group);
  eq("fingerprint", f.fingerprint);
  return w;
}

// True for a record that carries `code` as its deny code or among its result screens' codes.
std::string hasCode(Dialect d, const std::string& code, std::vector<history::ReportParam>* params) {
  params->emplace_back(code);
  if (d == Dialect::kPostgres) {
    params->emplace_back("[{\"code\":\"" + code + "\"}]");
    return "(deny_code = ? OR guard_actions @> CAST(? AS jsonb))";
  }
  // `code` holds only letters, digits and '_' (parseFilter): nothing to escape for LIKE but '_'.
  std::string pattern = "%\"code\":\"";
  for (char c : code) {
    if (c == '_') pattern += '\\';
    pattern += c;
  }
  params->emplace_back(pattern + "\"%");
  return "(deny_code = ? OR guard_actions LIKE ? ESCAPE '\\')";
}

}  // namespace

std::string queryParam(std::string_view query, std::string_view key) {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view pair = query.substr(pos, amp - pos);
    const size_t eq = pair.find('=');
    if (urlDecode(pair.substr(0, eq)) == key) {
      return eq == std::string_view::npos ? "" : urlDecode(pair.substr(eq + 1));
    }
    pos = amp + 1;
  }
  return "";
}

std::string urlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Result<Filter> parseFilter(std::string_view query) {
  Filter f;
  if (std::string since = queryParam(query, "since"); !since.empty()) {
    auto d = config::parseDuration(since);
    if (!d || d->count() <= 0 || *d > kMaxRange) {
      return Result<Filter>::fail("since: expected a duration up to 366d, such as 1h, 24h or 7d");
    }
    f.since = since;
    f.range = *d;
  }
  f.agent = queryParam(query, "agent");
  f.user = queryParam(query, "user");
  f.group = queryParam(query, "group");
  f.code = queryParam(query, "code");
  f.fingerprint = queryParam(query, "fingerprint");
  f.id = queryParam(query, "id");
  if (!f.code.empty() && !isCode(f.code)) {
    return Result<Filter>::fail("code: letters, digits and '_' only");
  }
  for (std::string* s : {&f.agent, &f.user, &f.group, &f.fingerprint, &f.id}) {
    history::sanitizeUtf8(*s);
  }
  return f;
}

std::string filterQuery(const Filter& f) {
  std::string q = "since=" + urlEncode(f.since);
  auto add = [&](const char* key, const std::string& value) {
    if (!value.empty()) q += std::string("&") + key + "=" + urlEncode(value);
  };
  add("agent", f.agent);
  add("user", f.user);
  add("group", f.group);
  add("code", f.code);
  add("fingerprint", f.fingerprint);
  return q;
}

std::string rangeStart(const Filter& f, int64_t now_us) {
  return history::formatTimestampUs(
      now_us - std::chrono::duration_cast<std::chrono::microseconds>(f.range).count());
}

Sql conversationsSql(Dialect d, const Filter& f, int64_t now_us) {
  Sql s;
  const std::string w = where(f, now_us, &s.params);
  std::string having;
  if (!f.code.empty()) {
    having = "\nHAVING SUM(CASE WHEN " + hasCode(d, f.code, &s.params) + " THEN 1 ELSE 0 END) > 0";
  }
  s.text = std::string(
               "SELECT conv AS conversation, MAX(agent_id) AS agent_id,\n"
               "       MAX(user_name) AS user_name, MAX(policy_group) AS policy_group,\n"
               "       COUNT(*) AS statements,\n"
               "       SUM(CASE WHEN ") +
           kDenied +
           " THEN 1 ELSE 0 END) AS denials,\n"
           "       SUM(warnings) AS warnings,\n"
           "       SUM(CASE WHEN " +
           kZero +
           " THEN 1 ELSE 0 END) AS zeros,\n"
           "       " +
           ts(d, "MIN(started_at)") + " AS first_at, " + ts(d, "MAX(started_at)") +
           " AS last_at\n"
           "FROM (SELECT *, " +
           kConv + " AS conv FROM " + history::kHistoryTable +
           "\n"
           "      WHERE " +
           w +
           ") h\n"
           "GROUP BY conv" +
           having +
           "\n"
           "ORDER BY MAX(started_at) DESC, conv\n"
           "LIMIT ?";
  s.params.emplace_back(kPageRows);
  return s;
}

Sql timelineSql(Dialect d, const Filter& f, int64_t now_us) {
  Sql s;
  const std::string key = history::conversationCondition(f.id, &s.params);
  s.params.emplace_back(rangeStart(f, now_us));
  s.text =
      "SELECT ROW_NUMBER() OVER (ORDER BY started_at, id) AS n, " + ts(d, "started_at") +
      " AS started_at,\n"
      "       agent_id, user_name, policy_group, statement_kind, outcome, deny_code, sqlstate,\n"
      "       error_message, warnings, CAST(guard_actions AS TEXT) AS guard_actions,\n"
      "       rows_returned, rows_affected, duration_us, host, tool_name, tool_args, sql_text\n"
      "FROM " +
      std::string(history::kHistoryTable) + "\nWHERE " + key +
      " AND started_at >= ?\nORDER BY started_at, id\nLIMIT ?";
  s.params.emplace_back(kTimelineRows);
  return s;
}

Sql denialsOverTimeSql(Dialect d, const Filter& f, int64_t now_us) {
  Sql s;
  const std::string w = where(f, now_us, &s.params);
  const bool hourly = f.range <= std::chrono::hours(48);
  std::string bucket;
  if (d == Dialect::kSqlite) {
    bucket = hourly ? "substr(started_at, 1, 13) || ':00'" : "substr(started_at, 1, 10)";
  } else {
    bucket = std::string("to_char(started_at AT TIME ZONE 'UTC', '") +
             (hourly ? "YYYY-MM-DD\"T\"HH24:00" : "YYYY-MM-DD") + "')";
  }
  s.text = "SELECT " + bucket + " AS bucket, deny_code, COUNT(*) AS denials\nFROM " +
           std::string(history::kHistoryTable) + "\nWHERE " + w + " AND " + kDenied +
           "\nGROUP BY 1, 2\nORDER BY 1, 2\nLIMIT 5000";
  return s;
}

Sql zerosByTableSql(Dialect d, const Filter& f, int64_t now_us) {
  Sql s;
  const std::string w = where(f, now_us, &s.params);
  const std::string each = d == Dialect::kSqlite
                               ? "json_each(h.tables) AS tb"
                               : "LATERAL jsonb_array_elements_text(h.tables) AS tb(value)";
  s.text = "SELECT tb.value AS table_name, COUNT(*) AS results\nFROM " +
           std::string(history::kHistoryTable) + " h, " + each + "\nWHERE " + w + " AND " + kZero +
           "\nGROUP BY tb.value\nORDER BY 2 DESC, 1\nLIMIT 20";
  return s;
}

}  // namespace pgwarden::studio
