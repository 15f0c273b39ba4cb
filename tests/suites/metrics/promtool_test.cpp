// The exposition checked by Prometheus' own tools: `promtool check metrics` (parser and lint)
// on a full scrape, and a real Prometheus server scraping the endpoint, which asks for OpenMetrics
// first, takes the text format it is answered with, and rejects the whole scrape on any format
// error.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/unit/net/metrics_endpoint_util.h"
#include "require_tool.h"

namespace pgwarden::metrics {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/pgw-metrics-XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `promtool check metrics` on `exposition`; returns the exit status and its output.
int promtoolCheck(const std::string& promtool, const std::string& exposition, std::string* out) {
  TempDir dir;
  std::string file = dir.path() + "/scrape.txt";
  std::ofstream(file) << exposition;
  return testing::runCommand(promtool + " check metrics < " + file, out);
}

TEST(Promtool, FullScrapeInTextFormatPasses) {
  auto promtool = testing::findExecutable("promtool");
  if (!promtool) PGW_MISSING_TOOL("promtool not installed (Debian package prometheus)");
  Metrics m(BuildInfo{"0.1.0", "0123456789ab"});
  testing::populate(m);
  std::string text = m.registry.render();
  std::string out;
  int rc = promtoolCheck(*promtool, text, &out);
  EXPECT_EQ(rc, 0) << out << "\n--- exposition ---\n" << text;
  EXPECT_EQ(out, "") << out;
}

TEST(Promtool, CatchesABrokenExposition) {
  // The check above can fail: promtool rejects what a registry bug would produce.
  auto promtool = testing::findExecutable("promtool");
  if (!promtool) PGW_MISSING_TOOL("promtool not installed (Debian package prometheus)");
  std::string out;
  EXPECT_NE(promtoolCheck(*promtool, "# TYPE x counter\nx{a=\"unterminated} 1\n", &out), 0);
  out.clear();
  EXPECT_NE(
      promtoolCheck(*promtool, "# HELP y_seconds y\n# TYPE y_seconds counter\ny_seconds 1\n", &out),
      0)
      << "counter without _total must be linted";
}

// The alerting rules shipped beside the Grafana dashboard: valid for Prometheus, and the rules
// the unit file exercises fire as it says (promtool test rules).
TEST(Promtool, ShippedAlertRulesPassCheckAndTheirTests) {
  auto promtool = testing::findExecutable("promtool");
  if (!promtool) PGW_MISSING_TOOL("promtool not installed (Debian package prometheus)");
  const std::string rules =
      std::string(PGWARDEN_SOURCE_DIR) + "/packaging/prometheus/pgwarden-alerts.yaml";
  std::string out;
  EXPECT_EQ(testing::runCommand(*promtool + " check rules " + rules + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("SUCCESS"), std::string::npos) << out;
  TempDir dir;
  fs::copy_file(rules, dir.path() + "/pgwarden-alerts.yaml");
  fs::copy_file(std::string(PGWARDEN_SOURCE_DIR) + "/tests/unit/metrics/alerts_test.yaml",
                dir.path() + "/alerts_test.yaml");
  out.clear();
  EXPECT_EQ(
      testing::runCommand(
          "cd " + dir.path() + " && " + *promtool + " test rules alerts_test.yaml 2>&1", &out),
      0)
      << out;
}

TEST(Promtool, EmptyCataloguePasses) {
  auto promtool = testing::findExecutable("promtool");
  if (!promtool) PGW_MISSING_TOOL("promtool not installed (Debian package prometheus)");
  Metrics m(BuildInfo{"0.1.0", "unknown"});
  std::string out;
  EXPECT_EQ(promtoolCheck(*promtool, m.registry.render(), &out), 0) << out;
}

std::string urlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// A Prometheus server on loopback, stopped and cleaned up by the destructor.
class PrometheusProcess {
 public:
  PrometheusProcess(const std::string& binary, int target_port) {
    port_ = testing::freePort();
    std::ofstream(dir_.path() + "/prometheus.yml")
        << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        << "scrape_configs:\n  - job_name: pgwarden\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << target_port << "']\n";
    log_ = dir_.path() + "/prometheus.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      std::FILE* log = std::freopen(log_.c_str(), "w", stdout);
      if (log != nullptr) ::dup2(::fileno(stdout), 2);
      std::string config = "--config.file=" + dir_.path() + "/prometheus.yml";
      std::string storage = "--storage.tsdb.path=" + dir_.path() + "/data";
      std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
      ::execl(binary.c_str(), "prometheus", config.c_str(), storage.c_str(), listen.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~PrometheusProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      for (int i = 0; i < 100; ++i) {
        if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
        std::this_thread::sleep_for(50ms);
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  std::optional<nlohmann::json> api(const std::string& path_and_query) {
    auto r = testing::get(port_, path_and_query);
    if (!r || r->code != 200) return std::nullopt;
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    return j;
  }
  std::optional<nlohmann::json> query(const std::string& promql) {
    auto j = api("/api/v1/query?query=" + urlEncode(promql));
    if (!j || (*j)["status"] != "success") return std::nullopt;
    return (*j)["data"]["result"];
  }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  TempDir dir_;
  std::string log_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST(PrometheusScrape, RealServerScrapesAndQueriesTheEndpoint) {
  auto binary = testing::findExecutable("prometheus");
  if (!binary) PGW_MISSING_TOOL("prometheus not installed (Debian package prometheus)");
  net::MetricsEndpointOptions o;
  o.listen = "127.0.0.1:0";
  testing::LoopServer s(o);
  ASSERT_TRUE(s.started()) << s.startError();
  testing::populate(s.metrics());
  PrometheusProcess prom(*binary, s.port());

  // Wait for a completed scrape; a format error shows as health "down" with lastError.
  std::string health, last_error;
  auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    if (auto j = prom.api("/api/v1/targets")) {
      auto& targets = (*j)["data"]["activeTargets"];
      if (!targets.empty()) {
        health = targets[0].value("health", "");
        last_error = targets[0].value("lastError", "");
        if (health == "up" || (health == "down" && !last_error.empty())) break;
      }
    }
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(health, "up") << "lastError: " << last_error << "\nprometheus log:\n" << prom.log();
  ASSERT_GE(s.metrics().http_scrapes.with({"text"}).value(), 2u);  // populate() adds one

  auto value = [&](const std::string& promql) -> std::string {
    auto r = prom.query(promql);
    if (!r || r->size() != 1) return "(no single result for " + promql + ")";
    return (*r)[0]["value"][1].get<std::string>();
  };
  EXPECT_EQ(value("pgwarden_statements_total{group=\"agents\",outcome=\"ok\",intent=\"lookup\"}"),
            "5");
  EXPECT_EQ(value("pgwarden_statement_duration_seconds_count{group=\"agents\",outcome=\"ok\"}"),
            "2");
  EXPECT_EQ(value("pgwarden_statement_duration_seconds_bucket{group=\"agents\",outcome=\"ok\","
                  "le=\"0.001\"}"),
            "1");
  EXPECT_EQ(value("pgwarden_history_queue_depth{store=\"sqlite\"}"), "7");
  EXPECT_GT(std::stod(value("pgwarden_process_resident_memory_bytes")), 1e6);
  EXPECT_EQ(value("pgwarden_build_info{version=\"0.0.0-test\",git_sha=\"0123456789ab\"}"), "1");
  // The escaped label value arrives intact.
  auto odd = prom.query("pgwarden_statements_total{intent=\"catalog\"}");
  ASSERT_TRUE(odd.has_value());
  ASSERT_EQ(odd->size(), 1u);
  EXPECT_EQ((*odd)[0]["metric"]["group"], "ana\"lysts\\ and\nmore");
}

}  // namespace
}  // namespace pgwarden::metrics
