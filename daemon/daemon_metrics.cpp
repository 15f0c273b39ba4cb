// How the daemon fills the metrics catalogue: per-statement series at the point the history
// record is submitted (so metrics and history count the same statements), everything else read
// from loop state when scraped. docs/metrics.md lists which family comes from where.
#include "daemon/daemon_metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <string_view>

#include "guards/codes.h"
#include "daemon/catalog_stats.h"
#include "session/client_session.h"
#include "daemon/daemon.h"
#include "session/statement_policy.h"
#include "mcp/mcp_server.h"
#include "mcp/tools.h"
#include "pgwarden_version.h"

namespace pgwarden::daemon {

namespace {

// Guard decision series cached by the daemon; past it, lookups go to the family (which has its
// own cap and overflow series), so a config reloaded many times cannot grow this without bound.
constexpr size_t kMaxDecisionCache = 4096;

// The inferred intent as the analysis names it; anything else (no analysis) is "other".
metrics::StatementIntent metricIntent(std::string_view intent) {
  using I = metrics::StatementIntent;
  if (intent == "catalog") return I::kCatalog;
  if (intent == "lookup") return I::kLookup;
  if (intent == "aggregation") return I::kAggregation;
  if (intent == "write") return I::kWrite;
  if (intent == "ddl") return I::kDdl;
  if (intent == "admin") return I::kAdmin;
  return I::kOther;
}

}  // namespace

size_t clientStateIndex(const session::ClientSession& s) {
  switch (s.state()) {
    case session::ClientState::kStartup:
    case session::ClientState::kAuth:
      return 0;
    case session::ClientState::kAcquiring:
    case session::ClientState::kAttaching:
      return 1;
    case session::ClientState::kReady:
      return s.busy() ? 3 : 2;
    case session::ClientState::kClosing:
    case session::ClientState::kClosed:
      return 4;
  }
  return 4;
}

std::vector<pool::PoolStats> mergePoolStats(const std::vector<pool::PoolStats>& all) {
  std::vector<pool::PoolStats> out;
  for (const pool::PoolStats& p : all) {
    auto it = std::find_if(out.begin(), out.end(), [&p](const pool::PoolStats& q) {
      return q.role == p.role && q.database == p.database && q.internal == p.internal &&
             q.writes == p.writes && q.host == p.host;
    });
    if (it == out.end()) {
      out.push_back(p);
      continue;
    }
    it->total += p.total;
    it->connecting += p.connecting;
    it->idle += p.idle;
    it->active += p.active;
    it->resetting += p.resetting;
    it->waiting += p.waiting;
  }
  return out;
}

DaemonMetrics::DaemonMetrics(Daemon& daemon)
    : daemon_(daemon), metrics_(metrics::BuildInfo{kVersion, kGitSha}) {
  for (size_t i = 0; i < metrics::kRejectReasons; ++i) {
    rejected_series_[i] = &metrics_.client_connections_rejected.with(
        {metrics::rejectReasonName(static_cast<metrics::RejectReason>(i))});
  }
  for (size_t i = 0; i < metrics::kConnectFailures; ++i) {
    connect_error_series_[i] = &metrics_.upstream_connect_errors.with(
        {metrics::connectFailureName(static_cast<metrics::ConnectFailure>(i))});
  }
  plan_hits_series_ = &metrics_.plan_cache_lookups.with({"hit"});
  plan_misses_series_ = &metrics_.plan_cache_lookups.with({"miss"});
  plan_shapes_series_ = &metrics_.plan_cache_lookups.with({"shape"});
  // Both kinds exist from the start, so a dashboard shows 0 rather than no data.
  for (const auto kind : {External::kLua, External::kWebhook}) {
    const std::string_view label = kind == External::kLua ? "lua" : "webhook";
    auto& e = external_[static_cast<size_t>(kind)];
    e.calls = &metrics_.external_guard_calls.with({label});
    e.failures = &metrics_.external_guard_failures.with({label});
    e.timeouts = &metrics_.external_guard_timeouts.with({label});
    e.duration = &metrics_.external_guard_duration.with({label});
  }
}

DaemonMetrics::~DaemonMetrics() { close(); }

bool DaemonMetrics::start() {
  // client_connections is the first family the registry renders, so its collector is where a
  // scrape copies the loop's plain counters into the catalogue before they are rendered.
  metrics_.client_connections.setCollector([this](metrics::SampleSink& sink) {
    syncCounters();
    collectClients(sink);
  });
  // Guarded writes, read from the loop's counters (index: session/write_txn.h TxnEnd).
  metrics_.write_transactions.setCollector([this](metrics::SampleSink& sink) {
    const metrics::Counters& c = totals_;
    sink.add({"committed"}, static_cast<double>(c.write_txn_committed));
    for (size_t i = 1; i < c.write_txn_rolled_back.size(); ++i) {
      sink.add({session::txnEndName(static_cast<session::TxnEnd>(i))},
               static_cast<double>(c.write_txn_rolled_back[i]));
    }
  });
  metrics_.rows_written.setCollector([this](metrics::SampleSink& sink) {
    sink.add({}, static_cast<double>(totals_.rows_written));
  });
  metrics_.writes_undone.setCollector([this](metrics::SampleSink& sink) {
    sink.add({}, static_cast<double>(totals_.writes_undone));
  });
  metrics_.client_stall_closes.setCollector([this](metrics::SampleSink& sink) {
    sink.add({}, static_cast<double>(totals_.clients_stalled));
  });
  metrics_.screen_probes.setCollector([this](metrics::SampleSink& sink) {
    const auto& n = totals_.screen_probes;
    sink.add({"absent"}, static_cast<double>(n[0]));
    sink.add({"present"}, static_cast<double>(n[1]));
    sink.add({"unanswered"}, static_cast<double>(n[2]));
  });
  metrics_.server_connections.setCollector(
      [this](metrics::SampleSink& sink) { collectServers(sink); });
  metrics_.pool_waiting.setCollector([this](metrics::SampleSink& sink) {
    for (const pool::PoolStats& p : pool_stats_)
      sink.add({p.role + "/" + p.database, p.host}, p.waiting);
  });
  collectHosts();
  metrics_.pool_assignments.setCollector([this](metrics::SampleSink& sink) {
    sink.add({}, static_cast<double>(totals_.pool_assignments));
  });
  metrics_.pool_reuse.setCollector([this](metrics::SampleSink& sink) {
    sink.add({}, static_cast<double>(totals_.pool_reuse));
  });
  metrics_.catalog_stats_age.setCollector([this](metrics::SampleSink& sink) {
    daemon_.catalog().forEachAge([&sink](const std::string& db, uint64_t age_ms) {
      sink.add({db}, static_cast<double>(age_ms) / 1000.0);
    });
  });
  // The MCP endpoint's figures, read from its counters at scrape time (zero when it is off).
  metrics_.mcp_requests.setCollector([this](metrics::SampleSink& sink) {
    const mcp::McpServer* m = daemon_.mcpServer();
    const mcp::McpCounters c = m ? m->counters() : mcp::McpCounters{};
    sink.add({"handled"}, static_cast<double>(c.http_requests - c.unauthorized - c.forbidden_origin));
    sink.add({"unauthorized"}, static_cast<double>(c.unauthorized));
    sink.add({"forbidden"}, static_cast<double>(c.forbidden_origin));
  });
  metrics_.mcp_sessions.setCollector([this](metrics::SampleSink& sink) {
    const mcp::McpServer* m = daemon_.mcpServer();
    sink.add({}, m ? static_cast<double>(m->sessionCount()) : 0.0);
  });
  metrics_.mcp_streams.setCollector([this](metrics::SampleSink& sink) {
    const mcp::McpServer* m = daemon_.mcpServer();
    sink.add({}, m ? static_cast<double>(m->streamCount()) : 0.0);
  });
  metrics_.mcp_tool_calls.setCollector([this](metrics::SampleSink& sink) {
    const mcp::McpServer* m = daemon_.mcpServer();
    if (!m) return;
    const auto& c = m->counters();
    for (size_t t = 0; t < mcp::kToolCount; ++t) {
      for (size_t o = 0; o < std::size(mcp::kCallOutcomes); ++o) {
        sink.add({mcp::toolName(static_cast<mcp::Tool>(t)), mcp::kCallOutcomes[o]},
                 static_cast<double>(c.tool_calls[t][o]));
      }
    }
    for (const auto& [name, counts] : c.operator_tool_calls) {
      for (size_t o = 0; o < counts.size(); ++o) sink.add({name, mcp::kCallOutcomes[o]}, static_cast<double>(counts[o]));
    }
  });
  metrics_.tool_calls.setCollector([this](metrics::SampleSink& sink) {
    const mcp::McpServer* m = daemon_.mcpServer();
    if (!m) return;
    for (const auto& [name, counts] : m->counters().operator_tool_calls) {
      for (size_t o = 0; o < counts.size(); ++o) sink.add({name, mcp::kCallOutcomes[o]}, static_cast<double>(counts[o]));
    }
  });

  const auto& options = daemon_.config()->metrics;
  if (options.listen.empty()) return true;
  http_ = std::make_unique<net::MetricsEndpoint>(daemon_.loop(), metrics_, options,
                                                     [this] { return readiness(); });
  // With several loops each publishes its figures before a scrape reads them.
  http_->setRefresh([this](std::function<void()> done) { daemon_.refreshSummaries(std::move(done)); });
  if (options.studio) startStudio();
  const Status st = http_->start();
  if (!st) {
    spdlog::error("metrics endpoint: {}", st.error());
    http_->close();
    http_.reset();
    return false;
  }
  spdlog::info("metrics endpoint listening on {} (/metrics, /healthz, /readyz{})", options.listen,
               options.studio ? ", /studio/" : "");
  return true;
}

void DaemonMetrics::startStudio() {
  const auto& h = daemon_.config()->history;
  studio::StudioOptions o;
  o.store = h.store;
  o.target = h.store == "sqlite" ? h.path : h.dsn;
  studio_ = std::make_unique<studio::Studio>(
      daemon_.loop(), std::move(o), [this](std::function<void(studio::LiveFigures)> done) {
        daemon_.refreshSummaries([this, done = std::move(done)] {
          studio::LiveFigures f;
          for (const auto& w : daemon_.summaries()) {
            f.sessions += w.sessions;
            for (uint64_t n : w.counters.statements) f.statements += n;
          }
          done(f);
        });
      });
  http_->setPages(studio_.get());
}

void DaemonMetrics::close() {
  if (studio_) studio_->close();  // the reader thread ends after its current query
  if (!http_) return;
  http_->setPages(nullptr);
  http_->close();  // keeps itself alive until its handles are closed
  http_.reset();
}

int DaemonMetrics::port() const { return http_ ? http_->port() : 0; }

void DaemonMetrics::setRecorder(const history::Recorder* recorder, const std::string& store) {
  if (!recorder) return;
  metrics_.setHistorySource(store, [recorder] {
    const auto st = recorder->stats();
    metrics::HistorySnapshot s;
    s.written = st.written;
    // Refused by the store on their own counts as dropped too: either way, missing from history.
    s.dropped = st.dropped + st.rejected;
    s.write_errors = st.write_errors;
    s.queue_depth = st.queue_depth;
    s.store_up = st.store_up ? 1 : 0;
    s.recovered = st.recovered;
    s.spool_used_bytes = st.spool_used_bytes;
    s.spool_size_bytes = st.spool_capacity;
    s.writer_background = st.writer_background ? 1 : 0;
    s.writer_promotions = st.writer_promotions;
    return s;
  });
}

metrics::GroupSeries& DaemonMetrics::group(std::string_view name) {
  auto it = groups_.find(name);
  if (it != groups_.end()) return *it->second;
  // Group names come from the config (a bounded set); "" is a session without a group.
  const std::string label = name.empty() ? std::string("none") : std::string(name);
  auto series = std::make_unique<metrics::GroupSeries>(metrics_, label);
  return *groups_.emplace(std::string(name), std::move(series)).first->second;
}

size_t DaemonMetrics::hostSlot(std::string_view host) {
  if (host.empty()) return metrics::GroupSeries::kHostNone;
  if (host == "primary") return metrics::GroupSeries::kHostPrimary;
  size_t slot = metrics::GroupSeries::kHostPrimary + 1;
  for (const auto& known : replica_hosts_) {
    if (known == host) return slot;
    ++slot;
  }
  // Hosts are upstream.host and upstream.replicas, fixed for the process's life: a few.
  if (slot < metrics::GroupSeries::kHostSlots) replica_hosts_.emplace_back(host);
  return slot;
}

void DaemonMetrics::onStatement(const history::RecordView& record, const session::StatementPlan* plan) {
  const auto lock = hotLock();
  auto& g = group(record.policy_group);
  const auto outcome = record.outcome;
  g.statements(outcome, metricIntent(record.query_intent_inferred), hostSlot(record.host),
               record.host.empty() ? std::string_view("none") : std::string_view(record.host))
      .inc();
  g.duration(outcome).observe(std::chrono::microseconds(record.duration_us));
  if (record.rows_returned > 0) g.rowsReturned().inc(static_cast<uint64_t>(record.rows_returned));
  if (record.truncated) g.truncated().inc();
  if (record.outcome == history::Outcome::kBudget) g.budgetExhausted().inc();
  for (const auto& code : record.result_warnings) {
    const auto& known = guards::codes::kResultScreens;
    const size_t index = static_cast<size_t>(std::find(std::begin(known), std::end(known), code) - std::begin(known));
    g.resultWarnings(index, code).inc();
  }
  if (!plan) return;
  // Every non-allow verdict the record carries in guard_actions, once per record: a denied
  // text of three statements is three records, each with the denial, as history shows it.
  for (const auto& v : plan->decision.actions) {
    const char* action = guards::actionName(v.action);
    decision_key_.clear();
    decision_key_.append(g.group()).push_back('\0');
    decision_key_.append(v.guard).push_back('\0');
    decision_key_.append(action).push_back('\0');
    decision_key_.append(v.code);
    auto it = decisions_.find(decision_key_);
    if (it != decisions_.end()) {
      it->second->inc();
      continue;
    }
    metrics::Counter& c = metrics_.guard_decisions.with({g.group(), v.guard, action, v.code});
    c.inc();
    if (decisions_.size() < kMaxDecisionCache) decisions_.emplace(decision_key_, &c);
  }
}

void DaemonMetrics::poolWait(bool transaction_mode, std::chrono::nanoseconds waited) {
  const auto lock = hotLock();
  metrics::Histogram*& h = pool_wait_[transaction_mode ? 1 : 0];
  if (!h) h = &metrics_.pool_wait.with({transaction_mode ? "transaction" : "session"});
  h->observe(waited);
}

void DaemonMetrics::guardEvaluated(std::string_view kind, std::chrono::nanoseconds spent) {
  const auto lock = hotLock();
  for (size_t i = 0; i < guard_kind_count_; ++i) {
    KindSeries& k = guard_kinds_[i];
    if ((k.data == kind.data() && k.kind.size() == kind.size()) || k.kind == kind) {
      k.duration->observe(spent);
      return;
    }
  }
  metrics::Histogram& h = metrics_.guard_duration.with({kind});
  h.observe(spent);
  if (guard_kind_count_ < kMaxGuardKinds) {
    guard_kinds_[guard_kind_count_++] = KindSeries{std::string(kind), kind.data(), &h};
  }
}

void DaemonMetrics::externalCall(External kind, CallResult result, std::chrono::nanoseconds spent) {
  const auto lock = hotLock();
  const auto& e = external_[static_cast<size_t>(kind)];
  e.calls->inc();
  switch (result) {
    case CallResult::kOk: break;
    case CallResult::kFailure: e.failures->inc(); break;
    case CallResult::kTimeout: e.timeouts->inc(); break;
  }
  e.duration->observe(spent);
}

void DaemonMetrics::syncCounters() {
  // One reading of every loop per scrape: loop 0's live, the others' last published.
  summaries_ = daemon_.summaries();
  totals_ = metrics::Counters{};
  for (const auto& w : summaries_) totals_ += w.counters;
  std::vector<pool::PoolStats> all;
  for (const auto& w : summaries_) all.insert(all.end(), w.pools.begin(), w.pools.end());
  pool_stats_ = mergePoolStats(all);
  const metrics::Counters& c = totals_;
  metrics_.client_connections_accepted.inc(c.clients_accepted - synced_accepted_);
  synced_accepted_ = c.clients_accepted;
  for (size_t i = 0; i < metrics::kRejectReasons; ++i) {
    rejected_series_[i]->inc(c.clients_rejected[i] - synced_rejected_[i]);
    synced_rejected_[i] = c.clients_rejected[i];
  }
  for (size_t i = 0; i < metrics::kConnectFailures; ++i) {
    connect_error_series_[i]->inc(c.server_connect_errors_by_reason[i] - synced_connect_errors_[i]);
    synced_connect_errors_[i] = c.server_connect_errors_by_reason[i];
  }
  metrics_.upstream_cancel_requests.inc(c.cancel_requests_forwarded - synced_cancels_);
  synced_cancels_ = c.cancel_requests_forwarded;
  plan_hits_series_->inc(c.plan_cache_hits - synced_plan_hits_);
  synced_plan_hits_ = c.plan_cache_hits;
  plan_misses_series_->inc(c.plan_cache_misses - synced_plan_misses_);
  synced_plan_misses_ = c.plan_cache_misses;
  plan_shapes_series_->inc(c.plan_shape_hits - synced_plan_shapes_);
  synced_plan_shapes_ = c.plan_shape_hits;
  for (size_t i = 0; i < c.server_errors_by_class.size(); ++i) {
    const uint64_t now = c.server_errors_by_class[i];
    if (now == synced_server_errors_[i]) continue;
    char cls[3];
    metrics::sqlstateClassName(static_cast<int>(i), cls);
    metrics_.upstream_server_errors.with({std::string_view(cls, 2)}).inc(now -
                                                                          synced_server_errors_[i]);
    synced_server_errors_[i] = now;
  }
  if (auto* ledger = daemon_.budgets()) {
    ledger->sweep();  // expired conversations leave the gauge (and memory) at the next scrape
    metrics_.conversations_live.set(static_cast<int64_t>(ledger->size()));
  }
}

void DaemonMetrics::collectClients(metrics::SampleSink& sink) {
  // Every state is reported, zero included, so a series does not vanish when it empties.
  std::array<uint64_t, 5> states{};
  for (const auto& w : summaries_) {
    for (size_t i = 0; i < states.size(); ++i) states[i] += w.client_states[i];
  }
  for (size_t i = 0; i < states.size(); ++i) sink.add({kClientStateLabels[i]}, static_cast<double>(states[i]));
}

void DaemonMetrics::collectHosts() {
  const auto hosts = [this] {
    const pool::HostHealth* h = daemon_.hostHealth();
    return h ? h->snapshot() : std::vector<pool::HostStatus>{};
  };
  metrics_.upstream_host_up.setCollector([hosts](metrics::SampleSink& sink) {
    for (const pool::HostStatus& h : hosts()) {
      sink.add({h.name, h.replica ? "replica" : "primary"}, h.up ? 1 : 0);
    }
  });
  metrics_.upstream_replica_lag.setCollector([hosts](metrics::SampleSink& sink) {
    for (const pool::HostStatus& h : hosts()) {
      if (h.replica && h.lag_ms >= 0) sink.add({h.name}, static_cast<double>(h.lag_ms) / 1000.0);
    }
  });
  metrics_.upstream_host_failures.setCollector([hosts](metrics::SampleSink& sink) {
    for (const pool::HostStatus& h : hosts()) sink.add({h.name}, static_cast<double>(h.failures));
  });
}

void DaemonMetrics::collectServers(metrics::SampleSink& sink) {
  for (const pool::PoolStats& p : pool_stats_) {
    const std::string pool = p.role + "/" + p.database;
    sink.add({pool, "connecting", p.host}, p.connecting);
    sink.add({pool, "idle", p.host}, p.idle);
    sink.add({pool, "active", p.host}, p.active);
    sink.add({pool, "resetting", p.host}, p.resetting);
  }
}

net::Readiness DaemonMetrics::readiness() const {
  if (daemon_.shuttingDown()) return {false, "shutting down"};
  const auto loops = daemon_.summaries();
  // PostgreSQL turns new backends away: new clients would be turned away too, pooled ones aside.
  for (const auto& w : loops) {
    if (!w.pool_refusal.empty()) return {false, "upstream refuses connections: " + w.pool_refusal};
  }
  // The listeners are bound before the endpoint starts and closed only at shutdown.
  metrics::Counters logins;
  for (const auto& w : loops) {
    for (const pool::PoolStats& p : w.pools) {
      if (p.idle + p.active + p.resetting > 0) return {true, ""};
    }
    logins += w.counters;  // the later of the loops' last login attempts
  }
  // No live connection: the outcome of the last login attempt decides. Before any attempt
  // nothing has failed, so pgwarden reports ready and the first failed login turns it to 503.
  if (logins.last_server_login == 0) return {false, "upstream unreachable"};
  return {true, ""};
}

}  // namespace pgwarden::daemon
