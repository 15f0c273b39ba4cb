// The catalogue of pgwarden_* families: their names, help texts, labels and caps, registered once;
// and the per-group series cache the statement path uses.
#include "metrics/metrics.h"

#include <chrono>
#include <memory>

#include "metrics/process_metrics.h"

namespace pgwarden::metrics {

const std::vector<double> kStatementDurationBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
const std::vector<double> kGuardDurationBuckets = {
    0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
    0.001,    0.0025,    0.005,    0.01,    0.05,     0.1,     0.5,    1,       5};
const std::vector<double> kExternalCallBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                  0.25,  0.5,    1,     2.5,  5,     10};

// ----- the catalogue --------------------------------------------------------------------------

const char* intentLabel(StatementIntent intent) {
  switch (intent) {
    case StatementIntent::kCatalog:
      return "catalog";
    case StatementIntent::kLookup:
      return "lookup";
    case StatementIntent::kAggregation:
      return "aggregation";
    case StatementIntent::kWrite:
      return "write";
    case StatementIntent::kDdl:
      return "ddl";
    case StatementIntent::kAdmin:
      return "admin";
    case StatementIntent::kOther:
      return "other";
  }
  return "other";
}

Metrics::Metrics(const BuildInfo& build)
    : client_connections(registry.callbackFamily(
          "pgwarden_client_connections",
          "Client connections by session state (startup, idle, active, waiting, closing).",
          MetricType::kGauge, {"state"})),
      server_connections(
          registry.callbackFamily("pgwarden_server_connections",
                                  "Server connections by pool (server role/database), state and "
                                  "upstream host.",
                                  MetricType::kGauge, {"pool", "state", "host"})),
      pool_waiting(registry.callbackFamily("pgwarden_pool_waiting_clients",
                                           "Clients waiting for a server connection, by pool "
                                           "and upstream host.",
                                           MetricType::kGauge, {"pool", "host"})),
      upstream_host_up(registry.callbackFamily(
          "pgwarden_upstream_host_up",
          "1 while an upstream host (the primary or a read replica) is in the rotation: it "
          "answered its last health check and no connection found it unreachable since.",
          MetricType::kGauge, {"host", "role"})),
      upstream_replica_lag(registry.callbackFamily(
          "pgwarden_upstream_replica_lag_seconds",
          "A read replica's replay lag at its last health check (0 when it has replayed all it "
          "received).",
          MetricType::kGauge, {"host"})),
      upstream_host_failures(registry.callbackFamily(
          "pgwarden_upstream_host_failures_total",
          "Times an upstream host was found not answering, by a health check or a login.",
          MetricType::kCounter, {"host"})),
      pool_assignments(registry.callbackFamily(
          "pgwarden_pool_assignments_total",
          "Server connections lent to clients: once per session in session pool_mode, once per "
          "transaction in transaction pool_mode.",
          MetricType::kCounter, {})),
      pool_reuse(registry.callbackFamily(
          "pgwarden_pool_reuse_total",
          "Server connections lent that had served a client before (not newly opened).",
          MetricType::kCounter, {})),
      pool_wait(
          registry.histogramFamily("pgwarden_pool_wait_seconds",
                                   "Time clients waited for a server connection, by pool_mode "
                                   "(only waits: a free connection taken at once is not one).",
                                   {"mode"}, kStatementDurationBuckets, 4)),
      mcp_requests(registry.callbackFamily(
          "pgwarden_mcp_requests_total",
          "HTTP requests to the MCP endpoint by result (handled, unauthorized, forbidden).",
          MetricType::kCounter, {"result"})),
      mcp_sessions(registry.callbackFamily("pgwarden_mcp_sessions", "MCP sessions open.",
                                           MetricType::kGauge, {})),
      mcp_streams(registry.callbackFamily("pgwarden_mcp_streams",
                                          "MCP sessions' server-to-client streams (GET) open.",
                                          MetricType::kGauge, {})),
      mcp_tool_calls(registry.callbackFamily(
          "pgwarden_mcp_tool_calls_total",
          "MCP tool calls by tool and outcome (ok, denied, error, cancelled).",
          MetricType::kCounter, {"tool", "outcome"})),
      tool_calls(registry.callbackFamily("pgwarden_tool_calls_total",
                                         "Calls of operator-defined tools (the tools: section) by "
                                         "tool and outcome (ok, denied, error, cancelled).",
                                         MetricType::kCounter, {"tool", "outcome"})),
      write_transactions(registry.callbackFamily(
          "pgwarden_write_transactions_total",
          "Guarded write transactions by how they ended (committed, client_rollback, idle_timeout, "
          "max_age, disconnect).",
          MetricType::kCounter, {"outcome"})),
      rows_written(registry.callbackFamily("pgwarden_rows_written_total",
                                           "Rows changed by guarded writes that stayed (statements "
                                           "undone for TOO_MANY_ROWS excluded).",
                                           MetricType::kCounter, {})),
      writes_undone(registry.callbackFamily(
          "pgwarden_writes_undone_total",
          "Guarded writes undone (rolled back to pgwarden's savepoint) for changing too many rows.",
          MetricType::kCounter, {})),
      client_stall_closes(registry.callbackFamily(
          "pgwarden_client_stall_closes_total",
          "Clients closed for taking none of their results for limits.client_stall_timeout while "
          "holding a server connection.",
          MetricType::kCounter, {})),
      screen_probes(registry.callbackFamily(
          "pgwarden_screen_probes_total",
          "The result screens' indexed probes of an empty read, by answer: absent (the value "
          "occurs nowhere), present, unanswered (timeout, error, no connection).",
          MetricType::kCounter, {"answer"})),
      client_connections_accepted(registry.counter("pgwarden_client_connections_accepted_total",
                                                   "Client connections accepted.")),
      client_connections_rejected(registry.counterFamily(
          "pgwarden_client_connections_rejected_total",
          "Client connections refused, by reason (max_connections, auth_failure, "
          "startup_timeout, bad_protocol).",
          {"reason"})),
      statements(registry.counterFamily("pgwarden_statements_total",
                                        "Statements by policy group, outcome, inferred intent and "
                                        "the upstream host they ran on.",
                                        {"group", "outcome", "intent", "host"})),
      statement_duration(registry.histogramFamily(
          "pgwarden_statement_duration_seconds",
          "Statement duration from receipt to the last byte sent to the client.",
          {"group", "outcome"}, kStatementDurationBuckets)),
      guard_duration(registry.histogramFamily("pgwarden_guard_duration_seconds",
                                              "Time spent evaluating one guard, by guard kind.",
                                              {"guard"}, kGuardDurationBuckets)),
      plan_cache_lookups(registry.counterFamily(
          "pgwarden_plan_cache_lookups_total",
          "Statement texts of deterministic policy groups looked up in the kept plans: a hit is "
          "judged without running the guard chain, a shape hit without its literal-blind guards.",
          {"result"}, 3)),
      rows_returned(registry.counterFamily(
          "pgwarden_rows_returned_total", "Rows returned to clients, by policy group.", {"group"})),
      statements_truncated(registry.counterFamily(
          "pgwarden_statements_truncated_total",
          "Statements whose result was cut at the group's row limit.", {"group"})),
      guard_decisions(registry.counterFamily(
          "pgwarden_guard_decisions_total",
          "Non-allow guard verdicts by group, guard kind, action (deny, warn, rewrite) and code.",
          {"group", "guard", "action", "code"}, 2000)),
      result_warnings(registry.counterFamily("pgwarden_result_warnings_total",
                                             "Results a result screen warned about (or denied), by "
                                             "group and code (UNKNOWN_VALUE, ...).",
                                             {"group", "code"}, 1000)),
      catalog_stats_age(registry.callbackFamily("pgwarden_catalog_stats_age_seconds",
                                                "Age of the catalog statistics snapshot (tables "
                                                "and column statistics) per server database.",
                                                MetricType::kGauge, {"database"})),
      budget_exhausted(registry.counterFamily(
          "pgwarden_budget_exhausted_total",
          "Statements refused because a conversation or user budget was exhausted.", {"group"})),
      conversations_live(registry.gauge("pgwarden_conversations_live",
                                        "Conversations with budget state held in memory.")),
      upstream_connect_errors(registry.counterFamily(
          "pgwarden_upstream_connect_errors_total",
          "Failed attempts to open a server connection, by reason (too_many_connections, "
          "auth_failed, refused, timeout, other).",
          {"reason"}, 10)),
      upstream_server_errors(registry.counterFamily(
          "pgwarden_upstream_server_errors_total",
          "ErrorResponses from PostgreSQL by SQLSTATE class (first two characters).",
          {"sqlstate_class"}, 100)),
      upstream_cancel_requests(registry.counter("pgwarden_upstream_cancel_requests_total",
                                                "CancelRequests forwarded to PostgreSQL.")),
      history_records_written(registry.callbackFamily("pgwarden_history_records_written_total",
                                                      "Query-history records written to the store.",
                                                      MetricType::kCounter, {"store"})),
      history_records_dropped(registry.callbackFamily(
          "pgwarden_history_records_dropped_total",
          "Query-history records dropped because the queue was full or the store failed.",
          MetricType::kCounter, {"store"})),
      history_write_errors(registry.callbackFamily("pgwarden_history_write_errors_total",
                                                   "Failed writes to the query-history store.",
                                                   MetricType::kCounter, {"store"})),
      history_queue_depth(registry.callbackFamily("pgwarden_history_queue_depth",
                                                  "Records waiting in the query-history queue.",
                                                  MetricType::kGauge, {"store"})),
      history_store_up(registry.callbackFamily(
          "pgwarden_history_store_up",
          "1 while the query-history store takes writes, 0 while it is down (records queue).",
          MetricType::kGauge, {"store"})),
      history_records_recovered(registry.callbackFamily(
          "pgwarden_history_records_recovered_total",
          "Query-history records found in the spool at start-up and written before new ones.",
          MetricType::kCounter, {"store"})),
      history_spool_used_bytes(registry.callbackFamily(
          "pgwarden_history_spool_used_bytes",
          "Bytes of the query-history spool holding records not yet stored.", MetricType::kGauge,
          {"store"})),
      history_writer_background(registry.callbackFamily(
          "pgwarden_history_writer_background",
          "1 while the query-history writer runs in the background (SCHED_BATCH, nice 19), 0 "
          "otherwise.",
          MetricType::kGauge, {"store"})),
      history_writer_promotions(registry.callbackFamily(
          "pgwarden_history_writer_promotions_total",
          "Times a backlog put the query-history writer back under the normal CPU policy.",
          MetricType::kCounter, {"store"})),
      history_spool_size_bytes(registry.callbackFamily(
          "pgwarden_history_spool_size_bytes",
          "Size of the query-history spool's ring (0 with history.durability: off).",
          MetricType::kGauge, {"store"})),
      external_guard_calls(registry.counterFamily("pgwarden_external_guard_calls_total",
                                                  "Calls to webhook and Lua guards, by kind.",
                                                  {"kind"}, 10)),
      external_guard_failures(registry.counterFamily(
          "pgwarden_external_guard_failures_total",
          "Webhook and Lua guard calls that failed (error, bad reply), by kind.", {"kind"}, 10)),
      external_guard_timeouts(registry.counterFamily(
          "pgwarden_external_guard_timeouts_total",
          "Webhook and Lua guard calls that hit their time or instruction limit, by kind.",
          {"kind"}, 10)),
      external_guard_duration(registry.histogramFamily(
          "pgwarden_external_guard_duration_seconds",
          "Latency of webhook and Lua guard calls, by kind.", {"kind"}, kExternalCallBuckets, 10)),
      http_requests(registry.counterFamily(
          "pgwarden_http_requests_total",
          "Requests to the metrics/health HTTP endpoint, by handler and status code.",
          {"handler", "code"}, 100)),
      http_scrapes(registry.counterFamily("pgwarden_http_scrapes_total",
                                          "Scrapes of /metrics by exposition format.", {"format"},
                                          4)),
      http_connections_rejected(registry.counterFamily(
          "pgwarden_http_connections_rejected_total",
          "HTTP connections closed without a response: over the client limit or timed out.",
          {"reason"}, 10)),
      config_last_reload_successful(registry.gauge(
          "pgwarden_config_last_reload_successful",
          "1 when the last load of the configuration file (start-up or reload) was accepted, 0 "
          "after a rejected reload (the running configuration was kept).")),
      config_last_reload_success_timestamp(
          registry.gauge("pgwarden_config_last_reload_success_timestamp_seconds",
                         "Unix time of the last accepted load of the configuration file.")) {
  config_last_reload_successful.set(1);
  config_last_reload_success_timestamp.set(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  // Known bounded label values start at zero, so rate() sees their first increment.
  for (const char* reason :
       {"max_connections", "auth_failure", "startup_timeout", "bad_protocol"}) {
    client_connections_rejected.with({reason});
  }
  for (const char* kind : {"webhook", "lua"}) {
    external_guard_calls.with({kind});
    external_guard_failures.with({kind});
    external_guard_timeouts.with({kind});
    external_guard_duration.with({kind});
  }
  registerProcessMetrics(registry, build);
}

void Metrics::setHistorySource(std::string store, std::function<HistorySnapshot()> source) {
  auto shared = std::make_shared<std::function<HistorySnapshot()>>(std::move(source));
  auto bind = [&](CallbackFamily& family, uint64_t HistorySnapshot::*field) {
    family.setCollector([shared, store, field](SampleSink& sink) {
      HistorySnapshot s = (*shared)();
      sink.add({store}, static_cast<double>(s.*field));
    });
  };
  bind(history_records_written, &HistorySnapshot::written);
  bind(history_records_dropped, &HistorySnapshot::dropped);
  bind(history_write_errors, &HistorySnapshot::write_errors);
  bind(history_queue_depth, &HistorySnapshot::queue_depth);
  bind(history_store_up, &HistorySnapshot::store_up);
  bind(history_records_recovered, &HistorySnapshot::recovered);
  bind(history_spool_used_bytes, &HistorySnapshot::spool_used_bytes);
  bind(history_spool_size_bytes, &HistorySnapshot::spool_size_bytes);
  bind(history_writer_background, &HistorySnapshot::writer_background);
  bind(history_writer_promotions, &HistorySnapshot::writer_promotions);
}

GroupSeries::GroupSeries(Metrics& metrics, std::string group)
    : metrics_(metrics),
      group_(std::move(group)),
      rows_returned_(metrics.rows_returned.with({group_})),
      truncated_(metrics.statements_truncated.with({group_})),
      budget_exhausted_(metrics.budget_exhausted.with({group_})) {}

Counter& GroupSeries::statements(Outcome outcome, StatementIntent intent, size_t host_slot,
                                 std::string_view host) {
  if (host_slot >= kHostSlots) {
    return metrics_.statements.with({group_, outcomeName(outcome), intentLabel(intent), host});
  }
  size_t i = static_cast<size_t>(outcome) * kStatementIntentCount + static_cast<size_t>(intent);
  Counter* c = statements_[host_slot][i].load(std::memory_order_acquire);
  if (c == nullptr) {
    c = &metrics_.statements.with({group_, outcomeName(outcome), intentLabel(intent), host});
    statements_[host_slot][i].store(c, std::memory_order_release);
  }
  return *c;
}

Counter& GroupSeries::resultWarnings(size_t index, std::string_view code) {
  if (index >= kResultScreenSlots) return metrics_.result_warnings.with({group_, code});
  Counter* c = result_warnings_[index].load(std::memory_order_acquire);
  if (c == nullptr) {
    c = &metrics_.result_warnings.with({group_, code});
    result_warnings_[index].store(c, std::memory_order_release);
  }
  return *c;
}

Histogram& GroupSeries::duration(Outcome outcome) {
  size_t i = static_cast<size_t>(outcome);
  Histogram* h = durations_[i].load(std::memory_order_acquire);
  if (h == nullptr) {
    h = &metrics_.statement_duration.with({group_, outcomeName(outcome)});
    durations_[i].store(h, std::memory_order_release);
  }
  return *h;
}

}  // namespace pgwarden::metrics
