// The daemon's side of the metrics: owns the Metrics catalogue and the HTTP endpoint, fills the
// per-statement series from the one place a statement is recorded, and reads everything the
// loop already counts (Counters, pools, sessions, the budget ledger, the recorder) when scraped.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/string_hash.h"
#include "daemon/worker.h"
#include "metrics/counters.h"
#include "net/metrics_endpoint.h"
#include "metrics/metrics.h"
#include "guards/policy.h"
#include "history/record.h"
#include "history/recorder.h"
#include "studio/studio.h"

namespace pgwarden::session {
class ClientSession;
struct StatementPlan;
}  // namespace pgwarden::session

namespace pgwarden::daemon {

class Daemon;

// A client session's state as pgwarden_client_connections counts it: an index into
// kClientStateLabels (WorkerSummary::client_states).
inline constexpr std::array<const char*, 5> kClientStateLabels = {"startup", "waiting", "idle",
                                                                  "active", "closing"};
size_t clientStateIndex(const session::ClientSession& s);
// Every loop's pools, one row per pool (role, database, internal, writes), the loops' figures
// added up.
std::vector<pool::PoolStats> mergePoolStats(const std::vector<pool::PoolStats>& all);

// Also the guard chain's observer (RequestContext::observer): guard evaluation time by guard
// kind and the calls to Lua scripts and policy services, on series resolved once.
class DaemonMetrics final : public guards::GuardObserver {
 public:
  explicit DaemonMetrics(Daemon& daemon);
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  metrics::Metrics& metrics() { return metrics_; }

  // Registers the scrape-time collectors and, unless metrics.listen is "", starts the endpoint.
  // Call once the client listeners are bound. False (after logging why) if it cannot listen.
  [[nodiscard]] bool start();
  // Stops the endpoint (shutdown). Safe to call twice.
  void close();
  // The port the endpoint listens on (0 when off).
  int port() const;

  // Several loops record statements: the per-statement series' caches take a lock then.
  void setThreaded(bool threaded) { threaded_ = threaded; }

  // The recorder whose counters pgwarden_history_* report (null: store off).
  void setRecorder(const history::Recorder* recorder, const std::string& store);

  // One statement, counted when its history record is submitted: statements, duration, rows,
  // truncation, budget exhaustion and the guard decisions the record carries. `plan` may be null.
  void onStatement(const history::RecordView& record, const session::StatementPlan* plan);

  // A client waited `waited` for a server connection (a connection taken at once is no wait).
  void poolWait(bool transaction_mode, std::chrono::nanoseconds waited);

  // guards::GuardObserver
  void guardEvaluated(std::string_view kind, std::chrono::nanoseconds spent) override;
  void externalCall(External kind, CallResult result, std::chrono::nanoseconds spent) override;

 private:
  metrics::GroupSeries& group(std::string_view name);
  void collectClients(metrics::SampleSink& sink);
  void collectServers(metrics::SampleSink& sink);
  // The upstream hosts' health (upstream.replicas), read from HostHealth when scraped.
  void collectHosts();
  // Brings the counters the loop keeps in Counters up to date (runs at the start of a scrape).
  void syncCounters();
  net::Readiness readiness() const;
  void startStudio();  // metrics.studio: the history studio on the endpoint

  std::unique_lock<std::mutex> hotLock() {
    return threaded_ ? std::unique_lock<std::mutex>(hot_mu_) : std::unique_lock<std::mutex>();
  }

  Daemon& daemon_;
  metrics::Metrics metrics_;
  bool threaded_ = false;
  std::mutex hot_mu_;  // the caches below, when several loops record
  // What the scrape in progress read of the loops (syncCounters, the first collector).
  std::vector<WorkerSummary> summaries_;
  metrics::Counters totals_;
  std::vector<pool::PoolStats> pool_stats_;
  metrics::Histogram* pool_wait_[2] = {nullptr, nullptr};  // {session, transaction}
  std::unique_ptr<net::MetricsEndpoint> http_;
  std::unique_ptr<studio::Studio> studio_;  // declared after http_: destroyed before it
  std::unordered_map<std::string, std::unique_ptr<metrics::GroupSeries>, StringViewHash, StringViewEqual>
      groups_;
  // (group, guard, action, code) -> its series; bounded by kMaxDecisionCache.
  std::unordered_map<std::string, metrics::Counter*> decisions_;
  std::string decision_key_;  // scratch, reused so a lookup does not allocate once warm
  // The replicas' host:port seen in records, in slot order from GroupSeries::kHostPrimary + 1.
  std::vector<std::string> replica_hosts_;
  size_t hostSlot(std::string_view host);

  // Guard kind -> its duration series. Kinds are a small fixed set; a linear scan comparing the
  // kind's pointer first (kind() returns a literal) costs less than hashing the name.
  struct KindSeries {
    std::string kind;
    const char* data = nullptr;
    metrics::Histogram* duration = nullptr;
  };
  static constexpr size_t kMaxGuardKinds = 32;
  std::array<KindSeries, kMaxGuardKinds> guard_kinds_{};
  size_t guard_kind_count_ = 0;
  // Indexed by GuardObserver::External (lua, webhook).
  struct ExternalSeries {
    metrics::Counter* calls = nullptr;
    metrics::Counter* failures = nullptr;
    metrics::Counter* timeouts = nullptr;
    metrics::Histogram* duration = nullptr;
  };
  std::array<ExternalSeries, 2> external_{};

  // What was last copied from Counters (the catalogue counters only go up by the difference).
  uint64_t synced_accepted_ = 0;
  std::array<uint64_t, metrics::kRejectReasons> synced_rejected_{};
  std::array<metrics::Counter*, metrics::kRejectReasons> rejected_series_{};
  std::array<uint64_t, metrics::kConnectFailures> synced_connect_errors_{};
  std::array<metrics::Counter*, metrics::kConnectFailures> connect_error_series_{};
  uint64_t synced_cancels_ = 0;
  uint64_t synced_plan_hits_ = 0;
  uint64_t synced_plan_misses_ = 0;
  uint64_t synced_plan_shapes_ = 0;
  metrics::Counter* plan_hits_series_ = nullptr;
  metrics::Counter* plan_misses_series_ = nullptr;
  metrics::Counter* plan_shapes_series_ = nullptr;
  std::array<uint64_t, 36 * 36> synced_server_errors_{};
};

}  // namespace pgwarden::daemon
