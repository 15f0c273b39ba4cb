// result_assertions and soft_delete_columns: parsed from a group's config, and the per-statement
// checks a result's rows go through (guards/result_assertions.h).
#include "guards/result_assertions.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>

#include "common/config_util.h"
#include "guards/guard.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

// A relation the statement reads matches a "schema.table" glob; an unqualified one matches
// whatever schema the pattern names (the search_path decides which it is).
bool readsTable(const analysis::StatementInfo& st, const std::vector<std::string>& globs) {
  if (globs.empty()) return true;
  for (const analysis::RelationRef& r : st.relations) {
    for (const std::string& g : globs) {
      const size_t dot = g.rfind('.');
      const std::string_view name =
          dot == std::string::npos ? std::string_view(g) : std::string_view(g).substr(dot + 1);
      if (!util::globMatch(name, r.name, false)) continue;
      if (r.schema.empty() || dot == std::string::npos ||
          util::globMatch(std::string_view(g).substr(0, dot), r.schema, false)) {
        return true;
      }
    }
  }
  return false;
}

bool forTool(const ResultAssertion& a, std::string_view tool) {
  if (a.tools.empty()) return true;
  for (const auto& t : a.tools) {
    if (t == tool) return true;
  }
  return false;
}

std::optional<double> number(std::string_view v) {
  if (v.empty() || v.size() > 40) return std::nullopt;
  char buf[48];
  v.copy(buf, v.size());
  buf[v.size()] = '\0';
  char* end = nullptr;
  const double d = std::strtod(buf, &end);
  if (end != buf + v.size()) return std::nullopt;
  return d;
}

}  // namespace

std::string numberText(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", d);
  return buf;
}

void assertionChecks(const GroupSettings& settings, const analysis::StatementInfo& st,
                     std::string_view tool, std::vector<AssertionCheck>& out) {
  out.clear();
  if (settings.result_assertions.empty() || !st.returns_rows) return;
  const std::vector<std::string>& names = st.screen.outputs;
  for (const ResultAssertion& a : settings.result_assertions) {
    if (!forTool(a, tool) || !readsTable(st, a.tables)) continue;
    if (a.rows >= 0) {
      AssertionCheck c;
      c.rows = a.rows;
      out.push_back(std::move(c));
    }
    if (!a.min && !a.max) continue;
    for (size_t i = 0; i < names.size(); ++i) {
      if (!util::globMatch(a.columns, names[i], true)) continue;
      AssertionCheck c;
      c.column = static_cast<int>(i);
      c.name = names[i];
      c.min = a.min;
      c.max = a.max;
      out.push_back(std::move(c));
    }
  }
}

bool hasToolAssertions(const GroupSettings& settings) {
  for (const auto& a : settings.result_assertions) {
    if (!a.tools.empty()) return true;
  }
  return false;
}

std::string boundsText(const AssertionCheck& c) {
  if (c.min && c.max) return numberText(*c.min) + ".." + numberText(*c.max);
  return c.min ? ">= " + numberText(*c.min) : "<= " + numberText(c.max.value_or(0));
}

void checkRow(const std::vector<AssertionCheck>& checks,
              const std::vector<std::optional<std::string_view>>& values, int64_t row,
              AssertionFailures& failures) {
  for (const AssertionCheck& c : checks) {
    if (c.column < 0 || static_cast<size_t>(c.column) >= values.size()) continue;
    const auto& cell = values[static_cast<size_t>(c.column)];
    if (!cell) continue;
    const auto v = number(*cell);
    if (!v || ((!c.min || *v >= *c.min) && (!c.max || *v <= *c.max))) continue;
    ++failures.count;
    if (failures.examples.size() < AssertionFailures::kMaxExamples) {
      failures.examples.push_back("row " + std::to_string(row) + ": " + c.name + " = " +
                                  std::string(*cell) + " (expected " + boundsText(c) + ")");
    }
  }
}

std::vector<ResultAssertion> parseResultAssertions(const YAML::Node& node,
                                                   const std::string& path) {
  std::vector<ResultAssertion> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  config::requireSequence(node, path);
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node n = node[i];
    const std::string p = path + "[" + std::to_string(i) + "]";
    config::requireMap(n, p);
    config::checkKeys(n, p, {"columns", "min", "max", "rows", "tables", "tools"});
    ResultAssertion a;
    a.columns = config::getString(n, p, "columns", "");
    a.tables = config::getStringList(n, p, "tables");
    a.tools = config::getStringList(n, p, "tools");
    if (n["min"].IsDefined()) a.min = config::getDouble(n, p, "min", 0);
    if (n["max"].IsDefined()) a.max = config::getDouble(n, p, "max", 0);
    a.rows = config::getInt(n, p, "rows", -1, 0, 1000000000);
    if (!n["rows"].IsDefined()) a.rows = -1;
    if ((a.min || a.max) && a.columns.empty()) {
      config::fail(n, p + ".columns",
                   "min and max need the result columns they hold for (a name or a glob: *_pct)");
    }
    if (!a.columns.empty() && !a.min && !a.max) {
      config::fail(n, p + ".columns", "columns needs min, max or both");
    }
    if (a.min && a.max && *a.min > *a.max) config::fail(n["min"], p + ".min", "min is above max");
    if (!a.min && !a.max && a.rows < 0) config::fail(n, p, "an assertion needs min, max or rows");
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<DeclaredColumn> parseSoftDeleteColumns(const YAML::Node& node,
                                                   const std::string& path) {
  std::vector<DeclaredColumn> out;
  const std::vector<std::string> listed = config::getStringList(node, path, "soft_delete_columns");
  for (size_t i = 0; i < listed.size(); ++i) {
    const std::string& s = listed[i];
    const size_t a = s.find('.');
    const size_t b = a == std::string::npos ? a : s.find('.', a + 1);
    if (b == std::string::npos || a == 0 || b == a + 1 || b + 1 == s.size() ||
        s.find('.', b + 1) != std::string::npos) {
      config::fail(node["soft_delete_columns"][i],
                   path + ".soft_delete_columns[" + std::to_string(i) + "]",
                   "expected schema.table.column, got '" + s + "'");
    }
    out.push_back(DeclaredColumn{s.substr(0, a), s.substr(a + 1, b - a - 1), s.substr(b + 1)});
  }
  return out;
}

}  // namespace pgwarden::guards
