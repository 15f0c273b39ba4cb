// The Grafana dashboard: valid Grafana 9+ JSON with a Prometheus data source variable, and every
// pgwarden_* series and label its PromQL uses exists in a live exposition.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/net/metrics_endpoint_util.h"

namespace pgwarden::metrics {
namespace {

using nlohmann::json;

json loadDashboard() {
  std::ifstream in(std::string(PGWARDEN_SOURCE_DIR) + "/packaging/grafana/pgwarden-dashboard.json");
  EXPECT_TRUE(in.good());
  return json::parse(in);  // throws (and fails the test) on invalid JSON
}

void collectPanels(const json& panels, std::vector<json>& out) {
  for (const auto& p : panels) {
    out.push_back(p);
    if (p.contains("panels")) collectPanels(p["panels"], out);
  }
}

std::vector<std::string> allExprs(const json& dashboard) {
  std::vector<std::string> exprs;
  std::vector<json> panels;
  collectPanels(dashboard["panels"], panels);
  for (const auto& p : panels) {
    if (!p.contains("targets")) continue;
    for (const auto& t : p["targets"]) exprs.push_back(t.at("expr").get<std::string>());
  }
  for (const auto& v : dashboard["templating"]["list"]) {
    if (v.value("type", "") == "query") exprs.push_back(v["query"]["query"].get<std::string>());
  }
  return exprs;
}

// Sample name -> label names seen on it, from a text-format exposition.
std::map<std::string, std::set<std::string>> samplesOf(const std::string& exposition) {
  std::map<std::string, std::set<std::string>> out;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t end = line.find_first_of("{ ");
    auto& labels = out[line.substr(0, end)];
    if (line[end] != '{') continue;
    // name="value" pairs; values may hold escaped quotes.
    size_t i = end + 1;
    while (i < line.size() && line[i] != '}') {
      size_t eq = line.find('=', i);
      labels.insert(line.substr(i, eq - i));
      i = eq + 2;
      while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
      i += 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
  }
  return out;
}

std::string liveExposition() {
  Metrics m(BuildInfo{"0.1.0", "abc"});
  testing::populate(m);
  return m.registry.render();
}

TEST(Dashboard, IsAGrafana9DashboardWithAPrometheusDatasourceVariable) {
  json d = loadDashboard();
  EXPECT_GE(d.at("schemaVersion").get<int>(), 36);
  EXPECT_FALSE(d.at("uid").get<std::string>().empty());
  EXPECT_FALSE(d.at("title").get<std::string>().empty());
  bool has_datasource_var = false;
  for (const auto& v : d.at("templating").at("list")) {
    if (v.at("type") == "datasource" && v.at("query") == "prometheus" &&
        v.at("name") == "datasource") {
      has_datasource_var = true;
    }
  }
  EXPECT_TRUE(has_datasource_var);
  std::vector<json> panels;
  collectPanels(d.at("panels"), panels);
  std::set<int> ids;
  for (const auto& p : panels) {
    std::string title = p.at("title").get<std::string>();
    EXPECT_FALSE(title.empty());
    EXPECT_TRUE(ids.insert(p.at("id").get<int>()).second) << "duplicate panel id in " << title;
    const auto& g = p.at("gridPos");
    EXPECT_GE(g.at("x").get<int>(), 0);
    EXPECT_LE(g.at("x").get<int>() + g.at("w").get<int>(), 24) << title;
    if (p.at("type") == "row") continue;
    // Every query panel goes through the variable, so the dashboard imports anywhere.
    EXPECT_EQ(p.at("datasource").at("uid"), "${datasource}") << title;
    ASSERT_TRUE(p.contains("targets")) << title;
    for (const auto& t : p.at("targets")) {
      EXPECT_EQ(t.at("datasource").at("uid"), "${datasource}") << title;
      EXPECT_FALSE(t.at("expr").get<std::string>().empty()) << title;
    }
  }
}

TEST(Dashboard, ChartsWhatOperatorsAskFor) {
  std::string all;
  for (const auto& e : allExprs(loadDashboard())) all += e + "\n";
  auto has = [&](const std::string& needle) { return all.find(needle) != std::string::npos; };
  EXPECT_TRUE(has("sum by (outcome) (rate(pgwarden_statements_total"));           // statements/s
  EXPECT_TRUE(has("sum by (guard, code) (rate(pgwarden_guard_decisions_total"));  // denials
  for (const char* q :
       {"histogram_quantile(0.5,", "histogram_quantile(0.95,", "histogram_quantile(0.99,"}) {
    EXPECT_TRUE(
        has(std::string(q) + " sum by (le) (rate(pgwarden_statement_duration_seconds_bucket"))
        << q;
  }
  EXPECT_TRUE(has("pgwarden_client_connections{"));
  EXPECT_TRUE(has("pgwarden_upstream_server_errors_total"));
  EXPECT_TRUE(has("pgwarden_history_queue_depth"));
  EXPECT_TRUE(has("pgwarden_history_records_dropped_total"));
  EXPECT_TRUE(has("pgwarden_budget_exhausted_total"));
  EXPECT_TRUE(has(
      "pgwarden_external_guard_duration_seconds_bucket{instance=~\"$instance\",kind=\"webhook\"}"));
}

// The PromQL pieces the checks below read, found by hand: std::regex trips GCC 12's
// -Wmaybe-uninitialized inside libstdc++ in the sanitizer build, and three fixed shapes need no
// regex engine.
bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Every `pgwarden_[A-Za-z0-9_:]*` in `expr`.
std::vector<std::string> seriesNames(const std::string& expr) {
  std::vector<std::string> out;
  for (size_t at = expr.find("pgwarden_"); at != std::string::npos; at = expr.find("pgwarden_", at)) {
    size_t end = at;
    while (end < expr.size() && (isNameChar(expr[end]) || expr[end] == ':')) ++end;
    out.push_back(expr.substr(at, end - at));
    at = end;
  }
  return out;
}

// The label lists of every `by (a, b)` in `expr`, split and trimmed.
std::vector<std::string> byLabels(const std::string& expr) {
  std::vector<std::string> out;
  for (size_t at = expr.find("by ("); at != std::string::npos; at = expr.find("by (", at)) {
    const size_t close = expr.find(')', at);
    if (close == std::string::npos) break;
    std::stringstream list(expr.substr(at + 4, close - at - 4));
    std::string label;
    while (std::getline(list, label, ',')) {
      label.erase(0, label.find_first_not_of(' '));
      label.erase(label.find_last_not_of(' ') + 1);
      out.push_back(label);
    }
    at = close;
  }
  return out;
}

// The label of every matcher `label op "` (op one of =, !=, =~, !~) in a selector's body.
std::vector<std::string> matcherLabels(const std::string& body) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < body.size()) {
    if (!std::isalpha(static_cast<unsigned char>(body[i])) && body[i] != '_') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < body.size() && isNameChar(body[end])) ++end;
    size_t j = end;
    while (j < body.size() && std::isspace(static_cast<unsigned char>(body[j]))) ++j;
    if (body.compare(j, 2, "=~") == 0 || body.compare(j, 2, "!~") == 0 ||
        body.compare(j, 2, "!=") == 0) {
      j += 2;
    } else if (j < body.size() && body[j] == '=') {
      j += 1;
    } else {
      i = end;
      continue;
    }
    while (j < body.size() && std::isspace(static_cast<unsigned char>(body[j]))) ++j;
    if (j < body.size() && body[j] == '"') {
      out.push_back(body.substr(i, end - i));
      i = j + 1;
    } else {
      i = end;
    }
  }
  return out;
}

TEST(Dashboard, ThePromQLScannersFindWhatTheyShould) {
  const std::string expr =
      "sum by (group, outcome) (rate(pgwarden_statements_total{instance=~\"$i\", job != \"x\"}[5m]))"
      " / ignoring(le) pgwarden_x:rate5m";
  EXPECT_EQ(seriesNames(expr),
            (std::vector<std::string>{"pgwarden_statements_total", "pgwarden_x:rate5m"}));
  EXPECT_EQ(byLabels(expr), (std::vector<std::string>{"group", "outcome"}));
  EXPECT_EQ(matcherLabels("{instance=~\"$i\", job != \"x\", 9le=\"1\", a=b}"),
            (std::vector<std::string>{"instance", "job", "le"}));
}

TEST(Dashboard, EveryQueriedSeriesAndLabelExistsInTheExposition) {
  auto samples = samplesOf(liveExposition());
  ASSERT_GT(samples.size(), 30u);
  size_t names_checked = 0;
  for (const auto& expr : allExprs(loadDashboard())) {
    std::set<std::string> labels_here = {"instance", "job"};  // added by Prometheus
    for (const std::string& name : seriesNames(expr)) {
      ++names_checked;
      // The dashboard must name series as exposed: _bucket/_sum/_count for histograms,
      // _total for counters. A histogram's bare family name has no samples.
      auto found = samples.find(name);
      ASSERT_NE(found, samples.end()) << "dashboard queries " << name
                                      << ", which the exposition does not contain\n  in: " << expr;
      labels_here.insert(found->second.begin(), found->second.end());
    }
    auto check = [&](const std::string& label) {
      EXPECT_TRUE(labels_here.count(label))
          << "label " << label << " not on any series of: " << expr;
    };
    for (const std::string& label : byLabels(expr)) check(label);
    // Label matchers inside selectors (the braces after a metric name).
    for (size_t open = expr.find('{'); open != std::string::npos; open = expr.find('{', open + 1)) {
      for (const std::string& label : matcherLabels(expr.substr(open, expr.find('}', open) - open))) {
        check(label);
      }
    }
  }
  EXPECT_GT(names_checked, 40u);
}

// The converse: every family the daemon exports is on some panel (a histogram through its
// _bucket, _sum or _count series). The pgwarden_process_* names are the standard process_*
// ones under their earlier names; the dashboard charts the standard ones.
TEST(Dashboard, ChartsEveryMetricFamily) {
  std::string all;
  for (const auto& e : allExprs(loadDashboard())) all += e + "\n";
  const auto charted = [&all](const std::string& name) {
    for (const char* suffix : {"", "_bucket", "_sum", "_count"}) {
      const std::string series = name + suffix;
      for (size_t at = all.find(series); at != std::string::npos; at = all.find(series, at + 1)) {
        const size_t end = at + series.size();
        const bool whole =
            (at == 0 || !isNameChar(all[at - 1])) && (end == all.size() || !isNameChar(all[end]));
        if (whole) return true;
      }
    }
    return false;
  };
  std::istringstream in(liveExposition());
  std::string line;
  size_t families = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    if (name.rfind("pgwarden_process_", 0) == 0) continue;
    ++families;
    EXPECT_TRUE(charted(name)) << name << " is on no panel of the dashboard";
  }
  EXPECT_GT(families, 50u);
}

TEST(Dashboard, TheCheckCatchesAnUnknownName) {
  // The name check above has teeth: a misspelt family is not in the exposition.
  auto samples = samplesOf(liveExposition());
  EXPECT_EQ(samples.count("pgwarden_statement_total"), 0u);
  EXPECT_EQ(samples.count("pgwarden_statement_duration_seconds"), 0u);  // bare histogram name
  EXPECT_EQ(samples.count("pgwarden_statements_total"), 1u);
  EXPECT_EQ(samples["pgwarden_statements_total"],
            (std::set<std::string>{"group", "outcome", "intent", "host"}));
}

}  // namespace
}  // namespace pgwarden::metrics
