// Names for counter labels and the SQLSTATE class index.
#include "metrics/counters.h"

#include <algorithm>

namespace pgwarden::metrics {

namespace {

int base36(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return -1;
}

char fromBase36(int v) { return static_cast<char>(v < 10 ? '0' + v : 'A' + v - 10); }

}  // namespace

namespace {

template <size_t N>
void addAll(std::array<uint64_t, N>& a, const std::array<uint64_t, N>& b) {
  for (size_t i = 0; i < N; ++i) a[i] += b[i];
}

}  // namespace

Counters& Counters::operator+=(const Counters& o) {
  clients_accepted += o.clients_accepted;
  addAll(clients_rejected, o.clients_rejected);
  clients_current += o.clients_current;
  clients_ready += o.clients_ready;
  auth_failures += o.auth_failures;
  server_connects += o.server_connects;
  server_connect_errors += o.server_connect_errors;
  addAll(server_connect_errors_by_reason, o.server_connect_errors_by_reason);
  if (o.last_server_login >= 0 &&
      (last_server_login < 0 || o.last_server_login_ms >= last_server_login_ms)) {
    last_server_login = o.last_server_login;
    last_server_login_ms = o.last_server_login_ms;
  }
  server_current += o.server_current;
  server_idle += o.server_idle;
  server_active += o.server_active;
  server_lost += o.server_lost;
  pool_assignments += o.pool_assignments;
  pool_reuse += o.pool_reuse;
  cancel_requests_received += o.cancel_requests_received;
  cancel_requests_forwarded += o.cancel_requests_forwarded;
  addAll(statements, o.statements);
  rows_returned += o.rows_returned;
  statements_truncated += o.statements_truncated;
  warnings_sent += o.warnings_sent;
  addAll(screen_probes, o.screen_probes);
  rewrites += o.rewrites;
  addAll(server_errors_by_class, o.server_errors_by_class);
  protocol_errors += o.protocol_errors;
  clients_stalled += o.clients_stalled;
  write_txn_committed += o.write_txn_committed;
  addAll(write_txn_rolled_back, o.write_txn_rolled_back);
  rows_written += o.rows_written;
  writes_undone += o.writes_undone;
  stats_refreshes += o.stats_refreshes;
  stats_refresh_errors += o.stats_refresh_errors;
  plan_cache_hits += o.plan_cache_hits;
  plan_cache_misses += o.plan_cache_misses;
  plan_shape_hits += o.plan_shape_hits;
  history_submitted += o.history_submitted;
  history_dropped += o.history_dropped;
  return *this;
}

const char* rejectReasonName(RejectReason r) {
  switch (r) {
    case RejectReason::kMaxConnections: return "max_connections";
    case RejectReason::kAuthFailure: return "auth_failure";
    case RejectReason::kStartupTimeout: return "startup_timeout";
    case RejectReason::kBadProtocol: return "bad_protocol";
    case RejectReason::kNotAllowed: return "not_allowed";
    case RejectReason::kUnreachable: return "unreachable";
    case RejectReason::kAcquireTimeout: return "acquire_timeout";
    case RejectReason::kShutdown: return "shutdown";
    case RejectReason::kStartupLimit: return "startup_limit";
  }
  return "?";
}

const char* connectFailureName(ConnectFailure f) {
  switch (f) {
    case ConnectFailure::kTooManyConnections: return "too_many_connections";
    case ConnectFailure::kAuthFailed: return "auth_failed";
    case ConnectFailure::kRefused: return "refused";
    case ConnectFailure::kTimeout: return "timeout";
    case ConnectFailure::kOther: return "other";
  }
  return "?";
}

int sqlstateClass(const char* sqlstate, size_t len) {
  if (len < 2) return -1;
  const int a = base36(sqlstate[0]);
  const int b = base36(sqlstate[1]);
  if (a < 0 || b < 0) return -1;
  return a * 36 + b;
}

void sqlstateClassName(int index, char out[3]) {
  out[0] = fromBase36(index / 36);
  out[1] = fromBase36(index % 36);
  out[2] = 0;
}

}  // namespace pgwarden::metrics
