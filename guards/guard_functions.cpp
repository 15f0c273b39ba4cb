// functions: which functions a statement may call. A safe default deny list (server files, large
// objects, other databases, backend signalling, locks, notifications, sequences, transaction ids,
// functions that run SQL given as text), bounds on pg_sleep and generate_series, set_config of
// protected settings, and an allow-list mode. Names arrive decoded by the parser (quotes and U&
// escapes resolved) and are matched case-insensitively, with or without a schema.
#include <cctype>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <optional>

#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

struct Category {
  const char* name;
  const char* why;
  const char* next;
};

constexpr Category kFile{"file_access", "it reads or lists files on the database server",
                         "query tables instead"};
constexpr Category kLargeObject{"large_object", "it reads or writes large objects",
                                "read table data with SELECT instead"};
constexpr Category kRemote{"remote_connection", "it connects to another database",
                           "query only this database"};
constexpr Category kServer{"server_control", "it controls the server or other sessions",
                           "leave server administration to a database administrator"};
constexpr Category kLock{"advisory_lock", "it takes or releases advisory locks",
                         "remove the call: a read needs no explicit lock"};
constexpr Category kNotify{"notification", "it sends notifications", "remove the call"};
constexpr Category kSequence{"sequence", "it changes a sequence",
                             "read the current value with SELECT last_value FROM the sequence"};
constexpr Category kXid{"transaction_id", "it assigns a transaction ID",
                        "use now() or pg_current_snapshot() instead"};
constexpr Category kSqlText{"sql_as_text", "it runs SQL given as text, which would escape the checks on that SQL",
                            "write the query directly instead"};
constexpr Category kNetwork{"server_address", "it reveals the database server's network address",
                            "remove the call"};
constexpr Category kConfigured{"configured", "it is on this connection's deny list",
                               "remove the call"};

struct DenyEntry {
  std::string pattern;
  const Category* category;
  // Only the form with this many arguments (-1: every form): ts_rewrite(query, select) runs its
  // second argument as SQL, ts_rewrite(query, target, substitute) runs none.
  int only_args = -1;
};

const std::vector<DenyEntry>& defaultDenyList() {
  static const std::vector<DenyEntry> kList = {
      {"pg_read_file", &kFile}, {"pg_read_binary_file", &kFile}, {"pg_ls_*", &kFile},
      {"pg_stat_file", &kFile}, {"pg_file_*", &kFile}, {"pg_logdir_ls", &kFile},
      {"pg_current_logfile", &kFile},
      {"lo_*", &kLargeObject}, {"loread", &kLargeObject}, {"lowrite", &kLargeObject},
      {"dblink*", &kRemote}, {"postgres_fdw_*", &kRemote},
      {"pg_terminate_backend", &kServer}, {"pg_cancel_backend", &kServer},
      {"pg_reload_conf", &kServer}, {"pg_rotate_logfile*", &kServer}, {"pg_switch_wal", &kServer},
      {"pg_switch_xlog", &kServer}, {"pg_create_restore_point", &kServer}, {"pg_promote", &kServer},
      {"pg_log_backend_memory_contexts", &kServer}, {"pg_*replication_slot*", &kServer},
      {"pg_replication_origin_*", &kServer}, {"pg_backup_*", &kServer},
      {"pg_start_backup", &kServer}, {"pg_stop_backup", &kServer}, {"pg_wal_replay_*", &kServer},
      {"pg_stat_reset*", &kServer}, {"pg_stat_statements_reset", &kServer},
      {"pg_import_system_collations", &kServer}, {"pg_logical_emit_message", &kServer},
      {"pg_logical_slot_*", &kServer}, {"binary_upgrade_*", &kServer},
      {"pg_advisory_*", &kLock}, {"pg_try_advisory_*", &kLock},
      {"pg_notify", &kNotify},
      {"nextval", &kSequence}, {"setval", &kSequence},
      {"txid_current", &kXid}, {"pg_current_xact_id", &kXid},
      {"query_to_xml*", &kSqlText}, {"query_to_xmlschema", &kSqlText}, {"cursor_to_xml*", &kSqlText},
      {"table_to_xml*", &kSqlText}, {"schema_to_xml*", &kSqlText}, {"database_to_xml*", &kSqlText},
      {"ts_stat", &kSqlText}, {"ts_rewrite", &kSqlText, 2},
      {"inet_server_addr", &kNetwork}, {"inet_server_port", &kNetwork},
  };
  return kList;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::optional<double> parseNumber(std::string_view s) {
  const std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Seconds in a PostgreSQL interval literal of the common forms ("5 minutes", "1 hour 30 min",
// "00:00:05", "2.5", "1 day"); nullopt for forms this does not read (ISO 8601, ...).
std::optional<double> intervalSeconds(std::string_view text) {
  std::string t = util::lower(trim(text));
  if (!t.empty() && t[0] == '@') t = trim(std::string_view(t).substr(1));
  if (t.empty()) return std::nullopt;
  int h = 0, m = 0;
  double sec = 0;
  int used = 0;
  if (std::sscanf(t.c_str(), "%d:%d:%lf%n", &h, &m, &sec, &used) == 3 && used == static_cast<int>(t.size())) {
    return h * 3600.0 + m * 60.0 + sec;
  }
  if (std::sscanf(t.c_str(), "%d:%d%n", &h, &m, &used) == 2 && used == static_cast<int>(t.size())) {
    return h * 3600.0 + m * 60.0;
  }
  double total = 0;
  size_t i = 0;
  bool any = false;
  while (i < t.size()) {
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
    if (i >= t.size()) break;
    size_t j = i;
    if (t[j] == '-' || t[j] == '+') ++j;
    while (j < t.size() && (std::isdigit(static_cast<unsigned char>(t[j])) || t[j] == '.')) ++j;
    if (j == i) return std::nullopt;
    const auto n = parseNumber(std::string_view(t).substr(i, j - i));
    if (!n) return std::nullopt;
    i = j;
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
    size_t k = i;
    while (k < t.size() && std::isalpha(static_cast<unsigned char>(t[k]))) ++k;
    const std::string unit = t.substr(i, k - i);
    i = k;
    double mult = 0;
    if (unit.empty() || unit == "s" || unit == "sec" || unit == "secs" || unit == "second" ||
        unit == "seconds") {
      mult = 1;
    } else if (unit == "ms" || unit == "msec" || unit == "msecs" || unit == "millisecond" ||
               unit == "milliseconds") {
      mult = 0.001;
    } else if (unit == "us" || unit == "usec" || unit == "microsecond" || unit == "microseconds") {
      mult = 1e-6;
    } else if (unit == "m" || unit == "min" || unit == "mins" || unit == "minute" || unit == "minutes") {
      mult = 60;
    } else if (unit == "h" || unit == "hr" || unit == "hrs" || unit == "hour" || unit == "hours") {
      mult = 3600;
    } else if (unit == "d" || unit == "day" || unit == "days") {
      mult = 86400;
    } else if (unit == "w" || unit == "week" || unit == "weeks") {
      mult = 7 * 86400;
    } else if (unit == "mon" || unit == "mons" || unit == "month" || unit == "months") {
      mult = 30 * 86400;
    } else if (unit == "y" || unit == "yr" || unit == "yrs" || unit == "year" || unit == "years") {
      mult = 365 * 86400;
    } else {
      return std::nullopt;
    }
    total += *n * mult;
    any = true;
  }
  if (!any) return std::nullopt;
  return total;
}

// Seconds since 1970 for 'YYYY-MM-DD' with an optional ' HH:MM[:SS]' / 'THH:MM[:SS]'.
std::optional<double> timestampSeconds(std::string_view text) {
  const std::string t = trim(text);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double s = 0;
  int used = 0;
  if (std::sscanf(t.c_str(), "%d-%d-%d%n", &y, &mo, &d, &used) != 3 || mo < 1 || mo > 12 || d < 1 ||
      d > 31) {
    return std::nullopt;
  }
  if (used < static_cast<int>(t.size())) {
    const char* rest = t.c_str() + used;
    if (*rest == 'T' || *rest == 't' || *rest == ' ') ++rest;
    if (std::sscanf(rest, "%d:%d:%lf", &h, &mi, &s) < 2) return std::nullopt;
  }
  // Days from civil (Howard Hinnant's algorithm).
  y -= mo <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const double days = era * 146097.0 + doe - 719468.0;
  return days * 86400 + h * 3600 + mi * 60 + s;
}

std::optional<double> numberArg(const analysis::ConstArg& a) {
  if (a.type == analysis::ConstArg::Type::kInteger || a.type == analysis::ConstArg::Type::kFloat)
    return a.number;
  if (a.type == analysis::ConstArg::Type::kString) return parseNumber(a.text);
  return std::nullopt;
}

// Rows generate_series(...) would produce, when its arguments are constants this can read.
std::optional<double> seriesRows(const analysis::FunctionCall& c) {
  if (c.args.size() < 2 || c.args.size() > 3) return std::nullopt;
  auto a = numberArg(c.args[0]), b = numberArg(c.args[1]);
  if (a && b) {
    double step = 1;
    if (c.args.size() == 3) {
      auto s = numberArg(c.args[2]);
      if (!s || *s == 0) return std::nullopt;
      step = *s;
    }
    return std::max(0.0, std::floor((*b - *a) / step) + 1);
  }
  if (c.args.size() == 3 && c.args[0].type == analysis::ConstArg::Type::kString &&
      c.args[1].type == analysis::ConstArg::Type::kString &&
      c.args[2].type == analysis::ConstArg::Type::kString) {
    auto t0 = timestampSeconds(c.args[0].text), t1 = timestampSeconds(c.args[1].text);
    auto step = intervalSeconds(c.args[2].text);
    if (t0 && t1 && step && *step != 0) return std::max(0.0, std::floor((*t1 - *t0) / *step) + 1);
  }
  return std::nullopt;
}

std::string callText(const analysis::FunctionCall& c) {
  std::string out = c.schema.empty() ? c.name : c.schema + "." + c.name;
  out += "(";
  for (size_t i = 0; i < c.args.size(); ++i) {
    if (i) out += ", ";
    const auto& a = c.args[i];
    switch (a.type) {
      case analysis::ConstArg::Type::kString:
        out += "'" + util::excerpt(a.text, 40) + "'";
        break;
      case analysis::ConstArg::Type::kNone:
        out += "...";
        break;
      case analysis::ConstArg::Type::kNull:
        out += "NULL";
        break;
      default: out += a.text;
    }
  }
  return out + ")";
}

class FunctionsGuard final : public Guard {
 public:
  struct Config {
    bool allow_mode = false;
    std::vector<DenyEntry> deny;
    std::vector<std::string> allow;
    double max_sleep_seconds = 1;
    int64_t max_series_rows = 1'000'000;
    std::vector<std::string> protected_settings;
  };
  FunctionsGuard(Config cfg, GroupSettings group) : cfg_(std::move(cfg)), group_(std::move(group)) {}

  std::string_view kind() const override { return "functions"; }
  bool deterministic() const override { return true; }
  std::vector<std::string_view> codes() const override {
    return {codes::kFunctionDenied, codes::kFunctionLimit, codes::kProtectedSetting};
  }

  GuardResult checkStatement(const GuardInput& in,
                             const analysis::StatementInfo& st) const override {
    (void)in;
    for (const auto& call : st.calls) {
      const std::string name = util::lower(call.name);
      const bool catalog = call.schema.empty() || util::iequals(call.schema, "pg_catalog");
      const bool allowed_by_list = matchesAny(cfg_.allow, call);
      if (cfg_.allow_mode && !allowed_by_list) return notAllowed(call);
      if (!cfg_.allow_mode && !allowed_by_list) {
        for (const auto& d : cfg_.deny) {
          if (d.only_args >= 0 && call.args.size() != static_cast<size_t>(d.only_args)) continue;
          if (matches(d.pattern, call)) return denied(call, *d.category);
        }
      }
      if (catalog && (name == "pg_sleep" || name == "pg_sleep_for" || name == "pg_sleep_until")) {
        if (auto r = checkSleep(call, name, perRow(st)); r.objects()) return r;
      }
      if (catalog && name == "generate_series" && cfg_.max_series_rows > 0) {
        const auto rows = seriesRows(call);
        if (rows && *rows > static_cast<double>(cfg_.max_series_rows)) return tooManyRows(call, *rows, false);
      }
    }
    // Series that are each within the bound still multiply when joined: bound the product.
    if (cfg_.max_series_rows > 0) {
      double product = 1;
      int series = 0;
      const analysis::FunctionCall* last = nullptr;
      for (const auto& call : st.calls) {
        if (!util::iequals(call.name, "generate_series")) continue;
        if (const auto rows = seriesRows(call)) {
          product *= std::max(1.0, *rows);
          ++series;
          last = &call;
        }
      }
      if (series > 1 && product > static_cast<double>(cfg_.max_series_rows)) return tooManyRows(*last, product, true);
    }
    for (const auto& name : st.set_config_names) {
      if (isProtectedSetting(name, cfg_.protected_settings)) {
        GuardResult r;
        r.action = Action::kDeny;
        r.code = std::string(codes::kProtectedSetting);
        r.subject = name;
        r.message = name == "*" ? std::string("set_config() with a setting name that is not a "
                                              "constant is not allowed on this connection; remove "
                                              "the call.")
                                : name + " is a protected setting on this connection and cannot be "
                                         "changed with set_config(); leave it as it is.";
        r.facts.add("setting", name).add("function", "set_config").add("next_step", "remove the set_config call");
        r.hint = "SELECT current_setting('" + (name == "*" ? std::string("statement_timeout") : name) + "')";
        return r;
      }
    }
    return {};
  }

 private:
  bool matches(const std::string& pattern, const analysis::FunctionCall& c) const {
    const std::string name = util::lower(c.name);
    if (pattern.find('.') == std::string::npos) return util::globMatch(pattern, name, true);
    if (!c.schema.empty()) return util::globMatch(pattern, util::lower(c.schema) + "." + name, true);
    if (util::globMatch(pattern, "pg_catalog." + name, true)) return true;
    if (group_.search_path.empty()) return util::globMatch(pattern, "public." + name, true);
    for (const auto& s : group_.search_path) {
      if (util::globMatch(pattern, s + "." + name, true)) return true;
    }
    return false;
  }

  bool matchesAny(const std::vector<std::string>& patterns, const analysis::FunctionCall& c) const {
    for (const auto& p : patterns) {
      if (matches(p, c)) return true;
    }
    return false;
  }

  static std::string shown(const analysis::FunctionCall& c) {
    return c.schema.empty() ? c.name : c.schema + "." + c.name;
  }

  GuardResult denied(const analysis::FunctionCall& c, const Category& cat) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kFunctionDenied);
    r.subject = util::lower(c.name);
    r.message = shown(c) + "() is not allowed on this connection because " + cat.why + "; " +
                cat.next + ".";
    r.facts.add("function", shown(c)).add("category", cat.name).add("next_step", cat.next);
    if (&cat == &kSequence) r.hint = "SELECT last_value FROM my_sequence";
    if (&cat == &kXid) r.hint = "SELECT now()";
    return r;
  }

  GuardResult notAllowed(const analysis::FunctionCall& c) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kFunctionDenied);
    r.subject = util::lower(c.name);
    r.message = shown(c) + "() is not on this connection's list of allowed functions; use only "
                "the allowed functions listed in the detail.";
    r.facts.add("function", shown(c)).add("category", "not_allowed").add("allowed", cfg_.allow)
        .add("next_step", "use only allowed functions");
    return r;
  }

  // Whether a call may run once per row: the statement reads a relation or calls a function that
  // returns a set. A sleep within the bound, repeated per row, is a long sleep.
  static bool perRow(const analysis::StatementInfo& st) {
    if (!st.relations.empty()) return true;
    static constexpr std::string_view kSetReturning[] = {
        "generate_series", "generate_subscripts", "unnest", "regexp_matches", "regexp_split_to_table",
        "string_to_table", "json_array_elements", "jsonb_array_elements", "json_array_elements_text",
        "jsonb_array_elements_text", "json_each", "jsonb_each", "json_each_text", "jsonb_each_text",
        "json_to_recordset", "jsonb_to_recordset", "json_populate_recordset", "jsonb_populate_recordset",
        "jsonb_path_query"};
    for (const auto& c : st.calls) {
      const std::string n = util::lower(c.name);
      for (auto srf : kSetReturning) {
        if (n == srf) return true;
      }
    }
    return false;
  }

  GuardResult checkSleep(const analysis::FunctionCall& c, const std::string& name,
                         bool per_row) const {
    std::optional<double> seconds;
    if (name == "pg_sleep" && !c.args.empty()) seconds = numberArg(c.args[0]);
    if (name == "pg_sleep_for" && !c.args.empty() &&
        c.args[0].type == analysis::ConstArg::Type::kString) {
      seconds = intervalSeconds(c.args[0].text);
    }
    if (seconds && *seconds <= cfg_.max_sleep_seconds && !per_row) return {};
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kFunctionLimit);
    r.subject = name;
    char max[32];
    std::snprintf(max, sizeof max, "%g", cfg_.max_sleep_seconds);
    const std::string unit = cfg_.max_sleep_seconds == 1 ? " second" : " seconds";
    if (cfg_.max_sleep_seconds <= 0) {
      r.message = callText(c) + " is not allowed: this connection does not allow sleeping; remove "
                  "the call.";
    } else if (per_row && seconds && *seconds <= cfg_.max_sleep_seconds) {
      r.message = callText(c) + " in a query that reads rows may sleep once per row; sleep only in a "
                  "query of its own (SELECT pg_sleep(n)), or remove the call.";
    } else if (seconds) {
      char got[32];
      std::snprintf(got, sizeof got, "%g", *seconds);
      r.message = callText(c) + " would sleep " + got + " seconds, more than the " + max + unit +
                  " allowed; remove the sleep or sleep at most " + max + unit + ".";
    } else {
      r.message = callText(c) + " sleeps for a time that cannot be checked before it runs; sleep "
                  "for a constant number of seconds up to " + std::string(max) + unit +
                  ", or remove the call.";
    }
    r.facts.add("function", shown(c)).add("max_sleep_seconds", cfg_.max_sleep_seconds);
    if (seconds) r.facts.add("seconds", *seconds);
    r.facts.add("next_step", "remove the sleep or shorten it");
    if (cfg_.max_sleep_seconds > 0) r.hint = std::string("SELECT pg_sleep(") + max + ")";
    return r;
  }

  GuardResult tooManyRows(const analysis::FunctionCall& c, double rows, bool joined) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kFunctionLimit);
    r.subject = "generate_series";
    const int64_t n = rows >= 9e18 ? INT64_MAX : static_cast<int64_t>(rows);
    r.message = (joined ? std::string("The generate_series calls of this query together") : callText(c)) +
                " would produce " + util::approxCount(n) + " rows, more than the " +
                util::withCommas(cfg_.max_series_rows) +
                " allowed; use a smaller range or a larger step.";
    r.facts.add("function", shown(c)).add("rows", n).add("max_series_rows", cfg_.max_series_rows)
        .add("next_step", "use a smaller range or a larger step");
    r.hint = "SELECT n FROM generate_series(1, 1000) AS n";
    return r;
  }

 public:
  std::string describe() const override {
    Facts f;
    if (cfg_.allow_mode) {
      f.add("allow", cfg_.allow);
    } else {
      std::vector<std::string> deny;
      for (const auto& d : cfg_.deny) deny.push_back(d.pattern);
      f.add("deny", deny);
    }
    f.add("max_sleep_seconds", cfg_.max_sleep_seconds).add("max_series_rows", cfg_.max_series_rows);
    return f.json(kind());
  }

 private:
  Config cfg_;
  GroupSettings group_;
};

}  // namespace

std::unique_ptr<Guard> makeFunctionsGuard(const YAML::Node& node, const std::string& path,
                                          const GroupSettings& group) {
  checkGuardKeys(node, path, {"mode", "deny", "allow", "builtin_deny", "max_sleep_seconds",
                              "max_series_rows", "protected_settings"});
  FunctionsGuard::Config cfg;
  const std::string mode = config::getString(node, path, "mode", "deny");
  if (mode != "deny" && mode != "allow") {
    config::fail(node["mode"], path + ".mode", "expected deny or allow, got '" + mode + "'");
  }
  cfg.allow_mode = mode == "allow";
  if (config::getBool(node, path, "builtin_deny", true)) cfg.deny = defaultDenyList();
  for (const auto& p : config::getStringList(node, path, "deny")) {
    cfg.deny.push_back(DenyEntry{util::lower(p), &kConfigured});
  }
  for (const auto& p : config::getStringList(node, path, "allow")) cfg.allow.push_back(util::lower(p));
  if (cfg.allow_mode && cfg.allow.empty()) {
    config::fail(node, path + ".allow", "mode: allow needs a non-empty allow list");
  }
  cfg.max_sleep_seconds = config::getDouble(node, path, "max_sleep_seconds", 1.0);
  if (cfg.max_sleep_seconds < 0) {
    config::fail(node["max_sleep_seconds"], path + ".max_sleep_seconds", "must be 0 or more");
  }
  cfg.max_series_rows = config::getInt(node, path, "max_series_rows", 1'000'000, 0);
  cfg.protected_settings = group.protected_settings;
  for (const auto& s : config::getStringList(node, path, "protected_settings")) {
    cfg.protected_settings.push_back(util::lower(s));
  }
  return std::make_unique<FunctionsGuard>(std::move(cfg), group);
}

}  // namespace pgwarden::guards
