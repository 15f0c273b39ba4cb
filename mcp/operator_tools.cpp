#include "mcp/operator_tools.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "analysis/analysis.h"
#include "common/ascii.h"
#include "common/config_util.h"
#include "guards/codes.h"

namespace pgwarden::mcp {

namespace cfg = pgwarden::config;

namespace {

constexpr int64_t kMaxRowsCeiling = 100000;
constexpr size_t kMaxSqlBytes = 64 * 1024;

bool identStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80); }
bool identChar(char c) { return identStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// A YAML scalar as JSON: quoted scalars stay strings; plain ones become null, booleans and numbers
// when they read as such (YAML 1.2 core schema).
Json scalarJson(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  Json number = Json::parse(s, nullptr, false);
  if (!number.is_discarded() && number.is_number()) return number;
  return s;
}

Json yamlJson(const YAML::Node& n, int depth = 0) {
  if (depth > 32) return nullptr;
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& e : n) a.push_back(yamlJson(e, depth + 1));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = yamlJson(kv.second, depth + 1);
      return o;
    }
    case YAML::NodeType::Scalar:
      return scalarJson(n);
    default:
      return nullptr;
  }
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
int64_t daysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// Seconds since the epoch of "YYYY-MM-DD" or an RFC 3339 date-time (offset applied); the schema
// has already checked the format, so this only reads it.
std::optional<double> instant(const Json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  int y = 0, mo = 0, d = 0;
  if (s.size() < 10 || std::sscanf(s.c_str(), "%4d-%2d-%2d", &y, &mo, &d) != 3) return std::nullopt;
  double t = static_cast<double>(daysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d))) * 86400.0;
  if (s.size() > 10 && (s[10] == 'T' || s[10] == 't' || s[10] == ' ')) {
    int h = 0, mi = 0;
    double sec = 0;
    if (std::sscanf(s.c_str() + 11, "%2d:%2d:%lf", &h, &mi, &sec) < 2) return std::nullopt;
    t += h * 3600.0 + mi * 60.0 + sec;
    const size_t z = s.find_first_of("Zz+-", 19);
    if (z != std::string::npos && s[z] != 'Z' && s[z] != 'z') {
      int oh = 0, om = 0;
      if (std::sscanf(s.c_str() + z + 1, "%2d:%2d", &oh, &om) == 2) {
        const double off = oh * 3600.0 + om * 60.0;
        t += s[z] == '+' ? -off : off;
      }
    }
  }
  return t;
}

std::string qualified(const analysis::PlanScan& scan) {
  return scan.schema.empty() ? scan.relation : scan.schema + "." + scan.relation;
}

bool matchesTable(const std::string& listed, const analysis::PlanScan& scan) {
  const size_t dot = listed.find('.');
  if (dot == std::string::npos) return listed == scan.relation;
  if (scan.schema.empty()) return listed.substr(dot + 1) == scan.relation;
  return listed == scan.schema + "." + scan.relation;
}

std::vector<std::string> stringList(const YAML::Node& n, const std::string& path) {
  std::vector<std::string> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  cfg::requireSequence(n, path);
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar() || n[i].Scalar().empty()) cfg::fail(n[i], path + "[" + std::to_string(i) + "]", "must be a name");
    out.push_back(n[i].Scalar());
  }
  return out;
}

void checkStatement(const YAML::Node& node, const std::string& path, const std::string& bound) {
  using analysis::LimitKind;
  using analysis::StatementKind;
  const auto a = analysis::analyzeUncached(bound);
  if (!a->ok) cfg::fail(node, path, "does not parse: " + a->error);
  if (a->statements.size() != 1) cfg::fail(node, path, "must be exactly one statement");
  const analysis::StatementInfo& st = a->statements[0];
  // Every group is read-only: a tool reads, and only with a plain SELECT.
  if (st.kind != StatementKind::kSelect || !st.returns_rows || st.locking_clause || st.select_into ||
      st.modifying_cte) {
    cfg::fail(node, path, "must be a read (a SELECT without FOR UPDATE, INTO or data-modifying WITH)");
  }
  if (st.limit != LimitKind::kNone) {
    cfg::fail(node, path, "has its own LIMIT; set max_rows instead (pgwarden appends the LIMIT)");
  }
}

std::shared_ptr<const OperatorTool> parseTool(const YAML::Node& n, const std::string& path,
                                              const std::vector<std::string>& groups) {
  cfg::requireMap(n, path);
  cfg::checkKeys(n, path, {"name", "title", "description", "groups", "parameters", "range_caps", "sql",
                           "max_rows", "plan_check", "result"});
  auto t = std::make_shared<OperatorTool>();
  t->line = cfg::lineOf(n);
  t->name = cfg::getString(n, path, "name", "");
  if (t->name.empty() || t->name.size() > 64 ||
      !std::all_of(t->name.begin(), t->name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      })) {
    cfg::fail(n["name"].IsDefined() ? n["name"] : n, path + ".name",
              "is required: 1 to 64 letters, digits, '_' or '-'");
  }
  const std::string tp = "tools." + t->name;
  t->title = cfg::getString(n, tp, "title", "");
  t->description = cfg::getString(n, tp, "description", "");
  if (t->description.empty()) cfg::fail(n, tp + ".description", "is required: it is what the model reads");
  t->groups = stringList(n["groups"], tp + ".groups");
  for (size_t i = 0; i < t->groups.size(); ++i) {
    if (std::find(groups.begin(), groups.end(), t->groups[i]) == groups.end()) {
      cfg::fail(n["groups"][i], tp + ".groups", "group \"" + t->groups[i] + "\" is not defined under groups");
    }
  }

  const YAML::Node params = n["parameters"];
  Json schema = params.IsDefined() && !params.IsNull() ? yamlJson(params)
                                                       : Json{{"type", "object"}, {"properties", Json::object()}};
  if (!schema.is_object() || schema.value("type", Json()) != "object") {
    cfg::fail(params.IsDefined() ? params : n, tp + ".parameters", "must be a schema of type: object");
  }
  if (!schema.contains("properties")) schema["properties"] = Json::object();
  if (!schema.contains("additionalProperties")) schema["additionalProperties"] = false;
  if (schema["additionalProperties"] != false) {
    cfg::fail(params, tp + ".parameters.additionalProperties", "must be false: a tool takes only the arguments it declares");
  }
  auto compiled = JsonSchema::compile(schema);
  if (!compiled) cfg::fail(params, tp + ".parameters", compiled.error());
  t->parameters = std::move(*compiled);

  const YAML::Node sql = n["sql"];
  t->sql = cfg::getString(n, tp, "sql", "");
  if (t->sql.empty()) cfg::fail(n, tp + ".sql", "is required");
  if (t->sql.size() > kMaxSqlBytes) cfg::fail(sql, tp + ".sql", "is longer than 64 KiB");
  auto bound = bindNamedParameters(t->sql, t->param_names);
  if (!bound) cfg::fail(sql, tp + ".sql", bound.error());
  const auto declared = t->parameters.propertyNames();
  for (const auto& p : t->param_names) {
    if (std::find(declared.begin(), declared.end(), p) == declared.end()) {
      cfg::fail(sql, tp + ".sql", "uses $" + p + ", which parameters.properties does not declare");
    }
  }
  for (const auto& p : declared) {
    if (std::find(t->param_names.begin(), t->param_names.end(), p) == t->param_names.end()) {
      cfg::fail(params, tp + ".parameters.properties." + p, "is declared but the sql never uses $" + p);
    }
  }
  std::string text = std::move(*bound);
  while (!text.empty() && (std::isspace(static_cast<unsigned char>(text.back())) || text.back() == ';')) text.pop_back();
  checkStatement(sql, tp + ".sql", text);
  t->max_rows = cfg::getInt(n, tp, "max_rows", 100, 1, kMaxRowsCeiling);
  // One row more than the cap: the extra row tells the caller the result was cut.
  t->bound_sql = text + "\nLIMIT " + std::to_string(t->max_rows + 1);

  const YAML::Node caps = n["range_caps"];
  if (caps.IsDefined() && !caps.IsNull()) {
    cfg::requireSequence(caps, tp + ".range_caps");
    for (size_t i = 0; i < caps.size(); ++i) {
      const std::string cp = tp + ".range_caps[" + std::to_string(i) + "]";
      cfg::requireMap(caps[i], cp);
      cfg::checkKeys(caps[i], cp, {"from", "to", "max_days"});
      RangeCap c;
      c.from = cfg::getString(caps[i], cp, "from", "");
      c.to = cfg::getString(caps[i], cp, "to", "");
      c.max_days = cfg::getInt(caps[i], cp, "max_days", 0, 1, 36500);
      if (c.max_days == 0) cfg::fail(caps[i], cp + ".max_days", "is required");
      for (const std::string* arg : {&c.from, &c.to}) {
        const Json& prop = schema["properties"].value(*arg, Json());
        const std::string fmt = prop.is_object() ? prop.value("format", std::string()) : std::string();
        if (fmt != "date" && fmt != "date-time") {
          cfg::fail(caps[i], cp, "\"" + *arg + "\" must be a parameter with format date or date-time");
        }
      }
      t->range_caps.push_back(std::move(c));
    }
  }

  const YAML::Node pc = n["plan_check"];
  if (pc.IsDefined() && !pc.IsNull()) {
    cfg::requireMap(pc, tp + ".plan_check");
    cfg::checkKeys(pc, tp + ".plan_check", {"deny_seq_scan_on"});
    for (auto& table : stringList(pc["deny_seq_scan_on"], tp + ".plan_check.deny_seq_scan_on")) {
      t->deny_seq_scan_on.push_back(lower(table));
    }
  }
  const std::string result = cfg::getString(n, tp, "result", "rows");
  if (result == "rows") {
    t->result = ToolResultShape::kRows;
  } else if (result == "scalar") {
    t->result = ToolResultShape::kScalar;
  } else if (result == "single_row") {
    t->result = ToolResultShape::kSingleRow;
  } else {
    cfg::fail(n["result"], tp + ".result", "must be rows, scalar or single_row");
  }
  return t;
}

}  // namespace

const char* resultShapeName(ToolResultShape s) {
  switch (s) {
    case ToolResultShape::kRows: return "rows";
    case ToolResultShape::kScalar: return "scalar";
    case ToolResultShape::kSingleRow: return "single_row";
  }
  return "rows";
}

bool OperatorTool::visibleTo(std::string_view group) const {
  return groups.empty() || std::find(groups.begin(), groups.end(), group) != groups.end();
}

const OperatorTool* OperatorToolSet::find(std::string_view name) const {
  for (const auto& t : tools_) {
    if (t->name == name) return t.get();
  }
  return nullptr;
}

std::shared_ptr<const OperatorToolSet> parseOperatorTools(const YAML::Node& node,
                                                          const std::vector<std::string>& groups,
                                                          const std::vector<std::string>& reserved) {
  std::vector<std::shared_ptr<const OperatorTool>> tools;
  if (node.IsDefined() && !node.IsNull()) {
    cfg::requireSequence(node, "tools");
    for (size_t i = 0; i < node.size(); ++i) {
      auto t = parseTool(node[i], "tools[" + std::to_string(i) + "]", groups);
      if (std::find(reserved.begin(), reserved.end(), t->name) != reserved.end()) {
        cfg::fail(node[i]["name"], "tools." + t->name + ".name", "\"" + t->name + "\" is a built-in tool's name");
      }
      for (const auto& other : tools) {
        if (other->name == t->name) {
          cfg::fail(node[i]["name"], "tools." + t->name + ".name",
                    "is defined twice (first at line " + std::to_string(other->line) + ")");
        }
      }
      tools.push_back(std::move(t));
    }
  }
  return std::make_shared<const OperatorToolSet>(std::move(tools));
}

Result<std::string> bindNamedParameters(std::string_view sql, std::vector<std::string>& names) {
  names.clear();
  std::string out;
  out.reserve(sql.size());
  size_t i = 0;
  const size_t n = sql.size();
  const auto copyUntil = [&](size_t end) {
    out.append(sql.substr(i, end - i));
    i = end;
  };
  while (i < n) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      // A literal or quoted identifier; a doubled quote stays inside it.
      size_t j = i + 1;
      while (j < n) {
        if (sql[j] == c) {
          if (j + 1 < n && sql[j + 1] == c) {
            j += 2;
            continue;
          }
          break;
        }
        // E'...' strings may escape the quote with a backslash.
        if (c == '\'' && sql[j] == '\\' && i > 0 && (sql[i - 1] == 'E' || sql[i - 1] == 'e')) ++j;
        ++j;
      }
      if (j >= n) return Result<std::string>::fail("has an unterminated quoted string or identifier");
      copyUntil(j + 1);
      continue;
    }
    if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      const size_t e = sql.find('\n', i);
      copyUntil(e == std::string_view::npos ? n : e);
      continue;
    }
    if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      // Block comments nest in PostgreSQL.
      int depth = 0;
      size_t j = i;
      while (j + 1 < n) {
        if (sql[j] == '/' && sql[j + 1] == '*') {
          ++depth;
          j += 2;
        } else if (sql[j] == '*' && sql[j + 1] == '/') {
          j += 2;
          if (--depth == 0) break;
        } else {
          ++j;
        }
      }
      if (depth != 0) return Result<std::string>::fail("has an unterminated /* comment");
      copyUntil(j);
      continue;
    }
    if (c == '$') {
      size_t j = i + 1;
      if (j < n && std::isdigit(static_cast<unsigned char>(sql[j]))) {
        return Result<std::string>::fail("uses a positional parameter ($1); name it ($from) and declare it in parameters");
      }
      // A name glued to a word before it (a$b) is part of that identifier.
      const bool in_word = i > 0 && identChar(sql[i - 1]);
      while (j < n && identChar(sql[j]) && (j > i + 1 || identStart(sql[j]))) ++j;
      if (j < n && sql[j] == '$') {
        // $tag$ ... $tag$: a dollar-quoted string.
        const std::string_view tag = sql.substr(i, j - i + 1);
        const size_t end = sql.find(tag, j + 1);
        if (end == std::string_view::npos) return Result<std::string>::fail("has an unterminated dollar-quoted string");
        copyUntil(end + tag.size());
        continue;
      }
      if (j > i + 1 && !in_word) {
        const std::string name(sql.substr(i + 1, j - i - 1));
        auto it = std::find(names.begin(), names.end(), name);
        if (it == names.end()) {
          names.push_back(name);
          it = names.end() - 1;
        }
        out += '$';
        out += std::to_string(it - names.begin() + 1);
        i = j;
        continue;
      }
      copyUntil(j);
      continue;
    }
    if (identStart(c)) {
      // Whole words at once, so "a$b" never looks like a parameter.
      size_t j = i;
      while (j < n && (identChar(sql[j]) || sql[j] == '$')) ++j;
      copyUntil(j);
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

std::optional<std::string> bindValue(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      return std::nullopt;
    case Json::value_t::string:
      return value.get<std::string>();
    case Json::value_t::boolean:
      return std::string(value.get<bool>() ? "true" : "false");
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return value.dump();
    case Json::value_t::array: {
      // An array literal: every element double-quoted (backslash before " and \), NULL bare.
      std::string s = "{";
      for (size_t i = 0; i < value.size(); ++i) {
        if (i) s += ',';
        const auto e = bindValue(value[i]);
        if (!e) {
          s += "NULL";
          continue;
        }
        s += '"';
        for (char c : *e) {
          if (c == '"' || c == '\\') s += '\\';
          s += c;
        }
        s += '"';
      }
      return s + "}";
    }
    case Json::value_t::object:
    case Json::value_t::binary:
      return value.dump();
  }
  return std::nullopt;
}

std::optional<Json> checkRangeCaps(const OperatorTool& tool, const Json& args) {
  for (const auto& c : tool.range_caps) {
    const Json from = args.is_object() ? args.value(c.from, Json()) : Json();
    const Json to = args.is_object() ? args.value(c.to, Json()) : Json();
    if (from.is_null() || to.is_null()) {
      return Json{{"code", "RANGE_REQUIRED"},
                  {"message", "give both \"" + c.from + "\" and \"" + c.to + "\": this tool reads at most " +
                                  std::to_string(c.max_days) + " days at a time"},
                  {"max_days", c.max_days},
                  {"next_step", "call again with " + c.from + " and " + c.to + " at most " +
                                    std::to_string(c.max_days) + " days apart"}};
    }
    const auto a = instant(from);
    const auto b = instant(to);
    if (!a || !b) continue;  // the schema's format check reports these
    if (*b < *a) {
      return Json{{"code", "RANGE_REVERSED"},
                  {"message", "\"" + c.to + "\" (" + to.get<std::string>() + ") is before \"" + c.from + "\" (" +
                                  from.get<std::string>() + ")"},
                  {"next_step", "swap them: " + c.from + " is the start, " + c.to + " the exclusive end"}};
    }
    const auto got = static_cast<int64_t>(std::ceil((*b - *a) / 86400.0));
    if (got > c.max_days) {
      const int64_t calls = (got + c.max_days - 1) / c.max_days;
      return Json{{"code", "RANGE_TOO_WIDE"},
                  {"message", "the range from " + from.get<std::string>() + " to " + to.get<std::string>() +
                                  " spans " + std::to_string(got) + " days; this tool reads at most " +
                                  std::to_string(c.max_days)},
                  {"max_days", c.max_days},
                  {"got_days", got},
                  {"next_step", "split the range into " + std::to_string(calls) + " calls of at most " +
                                    std::to_string(c.max_days) + " days each (" + c.to +
                                    " is exclusive, so each call's " + c.to + " is the next call's " + c.from + ")"}};
    }
  }
  return std::nullopt;
}

std::optional<guards::GuardResult> checkToolPlan(const OperatorTool& tool,
                                                 const analysis::PlanSummary& plan,
                                                 const analysis::TableStatsSnapshot* stats) {
  for (const auto& scan : plan.scans) {
    if (scan.node_type != "Seq Scan") continue;
    for (const auto& listed : tool.deny_seq_scan_on) {
      if (!matchesTable(listed, scan)) continue;
      guards::GuardResult r;
      r.action = guards::Action::kDeny;
      r.code = std::string(guards::codes::kSeqScan);
      r.subject = listed;
      const std::string table = qualified(scan);
      const size_t dot = listed.find('.');
      const analysis::TableStats* ts =
          !stats ? nullptr
          : dot == std::string::npos
              ? stats->find(scan.schema.empty() ? "public" : scan.schema, scan.relation)
              : stats->find(listed.substr(0, dot), listed.substr(dot + 1));
      std::string indexes = ts == nullptr ? "" : ts->indexed_columns.empty() ? "; it has no index at all"
                                                                             : "; its indexes lead with ";
      if (ts) {
        for (size_t i = 0; i < ts->indexed_columns.size() && i < 8; ++i) {
          indexes += (i ? ", " : "") + ts->indexed_columns[i];
        }
      }
      r.message = "The plan for tool " + tool.name + " reads all of " + table +
                  " with a sequential scan instead of an index" + indexes +
                  ". Narrow the arguments (a shorter range, a more selective value) so an index is used.";
      r.facts.add("tool", tool.name).add("table", table).add("plan_node", scan.node_type);
      r.facts.add("estimated_rows", static_cast<int64_t>(std::llround(scan.plan_rows)));
      if (ts) r.facts.add("indexed_columns", ts->indexed_columns);
      r.facts.add("next_step",
               "call again with narrower arguments; if a narrow call is refused too, the table has lost the index "
               "this tool relies on: report it to the operator");
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace pgwarden::mcp
