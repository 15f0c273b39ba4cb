// pgwarden's metrics catalogue: every pgwarden_* family the daemon exports, registered once at
// start-up in the registry (metrics/registry.h, prometheus-cpp underneath), and the per-group
// series a statement updates. The hot path updates a cached series: no lookup, no allocation, no
// formatting.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/outcome.h"
#include "metrics/registry.h"

namespace pgwarden::metrics {

// Bucket upper bounds in seconds (the +Inf bucket is implicit).
extern const std::vector<double> kStatementDurationBuckets;  // 100 us .. 30 s
extern const std::vector<double> kGuardDurationBuckets;      // 1 us .. 5 s
extern const std::vector<double> kExternalCallBuckets;       // 1 ms .. 10 s

// ---------------------------------------------------------------------------------------------
// The catalogue: every pgwarden_* family, created once. docs/metrics.md describes each one.
// Labels only ever carry bounded values (group, guard, code, outcome, intent, kind, state, ...):
// never conversation_id, agent_id, SQL or other client-chosen text.

struct BuildInfo {
  std::string version;
  std::string git_sha;
};

// A statement's outcome label is common/outcome.h's outcomeName(): the one Outcome history
// records and the counters count.
// Mirrors guards::Intent (the inferred intent; the client-sent one is free text and never a label).
enum class StatementIntent : uint8_t {
  kCatalog,
  kLookup,
  kAggregation,
  kWrite,
  kDdl,
  kAdmin,
  kOther
};
inline constexpr size_t kStatementIntentCount = 7;
const char* intentLabel(StatementIntent intent);

// What the history recorder reports (history::RecorderStats, without depending on it).
struct HistorySnapshot {
  uint64_t written = 0;
  uint64_t dropped = 0;
  uint64_t write_errors = 0;
  uint64_t queue_depth = 0;
  uint64_t store_up = 1;  // 1 while the store takes writes, 0 while it is down
  uint64_t recovered = 0;         // records found in the spool at start-up
  uint64_t spool_used_bytes = 0;  // history.durability: process; 0 without a spool
  uint64_t spool_size_bytes = 0;
  uint64_t writer_background = 0;   // 1 while the writer runs in the background
  uint64_t writer_promotions = 0;   // times a backlog put it back under the normal policy
};

struct Metrics {
  explicit Metrics(const BuildInfo& build);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  Registry registry;  // declared first: every reference below points into it

  // connections
  CallbackFamily& client_connections;          // gauge {state}
  CallbackFamily& server_connections;          // gauge {pool,state,host}
  CallbackFamily& pool_waiting;                 // gauge {pool,host}: clients waiting for a connection
  CallbackFamily& upstream_host_up;             // gauge {host,role}: in the rotation (HostHealth)
  CallbackFamily& upstream_replica_lag;         // gauge seconds {host}: replay lag at the last check
  CallbackFamily& upstream_host_failures;       // counter {host}: found not answering
  CallbackFamily& pool_assignments;             // counter: server connections lent (per session or transaction)
  CallbackFamily& pool_reuse;                   // counter: lent connections that served a client before
  HistogramFamily& pool_wait;                   // seconds {mode}: waits for a server connection
  CallbackFamily& mcp_requests;                 // counter {result}: the MCP endpoint's HTTP requests
  CallbackFamily& mcp_sessions;                 // gauge: MCP sessions open
  CallbackFamily& mcp_streams;                  // gauge: MCP GET streams open
  CallbackFamily& mcp_tool_calls;               // counter {tool,outcome}
  CallbackFamily& tool_calls;                   // counter {tool,outcome}: operator-defined tools
  CallbackFamily& write_transactions;           // counter {outcome}: guarded write transactions
  CallbackFamily& rows_written;                 // counter: rows changed by writes that were kept
  CallbackFamily& writes_undone;                // counter: writes undone for TOO_MANY_ROWS
  CallbackFamily& client_stall_closes;          // counter: limits.client_stall_timeout closes
  CallbackFamily& screen_probes;                // counter {answer}: the screens' indexed probes
  Counter& client_connections_accepted;        // pgwarden_client_connections_accepted_total
  CounterFamily& client_connections_rejected;  // {reason}
  // statements
  CounterFamily& statements;            // {group,outcome,intent,host}
  HistogramFamily& statement_duration;  // seconds {group,outcome}
  HistogramFamily& guard_duration;      // seconds {guard}
  CounterFamily& plan_cache_lookups;    // {result}: hit, miss
  CounterFamily& rows_returned;         // {group}
  CounterFamily& statements_truncated;  // {group}
  // guards and budgets
  CounterFamily& guard_decisions;   // {group,guard,action,code}
  CounterFamily& result_warnings;   // {group,code}: result screens that spoke
  CallbackFamily& catalog_stats_age;  // gauge seconds {database}
  CounterFamily& budget_exhausted;  // {group}
  Gauge& conversations_live;
  // upstream
  CounterFamily& upstream_connect_errors;  // {reason}
  CounterFamily& upstream_server_errors;  // {sqlstate_class}
  Counter& upstream_cancel_requests;
  // history (collected from the recorder at scrape time, see setHistorySource)
  CallbackFamily& history_records_written;  // counter {store}
  CallbackFamily& history_records_dropped;  // counter {store}
  CallbackFamily& history_write_errors;     // counter {store}
  CallbackFamily& history_queue_depth;      // gauge {store}
  CallbackFamily& history_store_up;         // gauge {store}
  CallbackFamily& history_records_recovered;  // counter {store}
  CallbackFamily& history_spool_used_bytes;   // gauge {store}
  CallbackFamily& history_writer_background;  // gauge {store}
  CallbackFamily& history_writer_promotions;  // counter {store}
  CallbackFamily& history_spool_size_bytes;   // gauge {store}
  // webhook and Lua guards
  CounterFamily& external_guard_calls;       // {kind}
  CounterFamily& external_guard_failures;    // {kind}
  CounterFamily& external_guard_timeouts;    // {kind}
  HistogramFamily& external_guard_duration;  // seconds {kind}
  // the HTTP endpoint itself
  CounterFamily& http_requests;              // {handler,code}
  CounterFamily& http_scrapes;               // {format}
  CounterFamily& http_connections_rejected;  // {reason}
  // the configuration file: 1 when the last load (start-up or reload) was accepted, 0 after a
  // rejected reload; and the Unix time of the last accepted load (Prometheus's own names)
  Gauge& config_last_reload_successful;
  Gauge& config_last_reload_success_timestamp;
  // process figures and build info are registered by registerProcessMetrics().

  // Reads the recorder's counters at scrape time. `source` runs on the scraping thread and must
  // be cheap and thread-safe (Recorder::stats() is).
  void setHistorySource(std::string store, std::function<HistorySnapshot()> source);
};

// The series one policy group's sessions update per statement, resolved lazily (first use of an
// outcome/intent takes the family's lock once) and cached, so the per-statement cost is an atomic
// load and an atomic add. Build one per group when the config loads and share it.
class GroupSeries {
 public:
  GroupSeries(Metrics& metrics, std::string group);
  // statements_total{group,outcome,intent,host}. `host`: the upstream host the statement ran on
  // (history's host; "none" when it reached no server); `host_slot` its place among the hosts the
  // caller has seen (below kHostSlots: hosts are the primary and a few replicas), so each series is
  // resolved once. Slots 0 and 1 are "none" and "primary".
  static constexpr size_t kHostSlots = 8;
  static constexpr size_t kHostNone = 0;
  static constexpr size_t kHostPrimary = 1;
  Counter& statements(Outcome outcome, StatementIntent intent, size_t host_slot = kHostPrimary,
                      std::string_view host = "primary");
  Histogram& duration(Outcome outcome);
  Counter& rowsReturned() { return rows_returned_; }
  Counter& truncated() { return truncated_; }
  Counter& budgetExhausted() { return budget_exhausted_; }
  // result_warnings{group,code}: `index` is the code's place among the result screen codes
  // (below kResultScreenSlots), so each series is resolved once.
  static constexpr size_t kResultScreenSlots = 8;
  Counter& resultWarnings(size_t index, std::string_view code);
  const std::string& group() const { return group_; }

 private:
  Metrics& metrics_;
  std::string group_;
  std::atomic<Counter*> statements_[kHostSlots][kOutcomeCount * kStatementIntentCount] = {};
  std::atomic<Histogram*> durations_[kOutcomeCount] = {};
  std::atomic<Counter*> result_warnings_[kResultScreenSlots] = {};
  Counter& rows_returned_;
  Counter& truncated_;
  Counter& budget_exhausted_;
};

}  // namespace pgwarden::metrics
