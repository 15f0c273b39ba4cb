// Plain counters the daemon keeps as traffic flows, for the metrics exposition and the admin
// console to read. Each loop keeps its own, updated and read on that loop's thread only: no
// atomics, no locks, no allocation per statement; the other loops see a copy it publishes, and
// the process's figures are the sum (operator+=). Gauges are kept current; totals only grow.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/outcome.h"

namespace pgwarden::metrics {

// Why a client connection was refused or ended before it was ready.
enum class RejectReason { kMaxConnections, kAuthFailure, kStartupTimeout, kBadProtocol,
                          kNotAllowed, kUnreachable, kAcquireTimeout, kShutdown, kStartupLimit };
inline constexpr size_t kRejectReasons = 9;
const char* rejectReasonName(RejectReason r);  // "max_connections", "auth_failure", ...

// Why a server connection could not be opened (pgwarden_upstream_connect_errors_total{reason}).
enum class ConnectFailure { kTooManyConnections, kAuthFailed, kRefused, kTimeout, kOther };
inline constexpr size_t kConnectFailures = 5;
const char* connectFailureName(ConnectFailure f);  // "too_many_connections", "auth_failed", ...

struct Counters {
  // Client connections.
  uint64_t clients_accepted = 0;                          // total accepted sockets
  std::array<uint64_t, kRejectReasons> clients_rejected{};  // by RejectReason
  uint64_t clients_current = 0;                           // gauge: sessions alive (any state)
  uint64_t clients_ready = 0;                             // gauge: authenticated and attached
  uint64_t auth_failures = 0;

  // Server connections (all pools).
  uint64_t server_connects = 0;          // login attempts started
  uint64_t server_connect_errors = 0;    // connect or login failures
  std::array<uint64_t, kConnectFailures> server_connect_errors_by_reason{};  // by ConnectFailure
  int last_server_login = -1;            // last login attempt: 1 ok, 0 failed, -1 none yet
  uint64_t last_server_login_ms = 0;     // when it ended (the loop's clock)
  uint64_t server_current = 0;           // gauge: open server connections
  uint64_t server_idle = 0;              // gauge: idle in a pool
  uint64_t server_active = 0;            // gauge: lent to a client
  uint64_t server_lost = 0;              // connections that died under a client
  uint64_t pool_assignments = 0;         // connections lent (per session or per transaction)
  uint64_t pool_reuse = 0;               // of those, connections that had served a client before
  uint64_t cancel_requests_received = 0;
  uint64_t cancel_requests_forwarded = 0;

  // Statements (one per statement, as history counts them).
  std::array<uint64_t, kOutcomeCount> statements{};  // by Outcome
  uint64_t rows_returned = 0;
  uint64_t statements_truncated = 0;     // row cap cut the result
  uint64_t warnings_sent = 0;            // NoticeResponses from guards
  // The result screens' indexed probes (screens/probe.h), by answer: the value absent, present,
  // unanswered (timeout, error, no connection).
  std::array<uint64_t, 3> screen_probes{};
  uint64_t rewrites = 0;                 // statements forwarded as rewritten SQL
  // Server errors by SQLSTATE class: index = class digits as a base-36 pair (see sqlstateClass).
  std::array<uint64_t, 36 * 36> server_errors_by_class{};
  uint64_t protocol_errors = 0;          // bad client messages (08P01 sent)
  uint64_t clients_stalled = 0;          // closed by limits.client_stall_timeout

  // Guarded writes (docs/writes.md): transactions committed, and rolled back by why (index:
  // session/write_txn.h TxnEnd; kCommitted unused there), rows the kept writes changed, writes
  // undone for changing more rows than allowed.
  uint64_t write_txn_committed = 0;
  std::array<uint64_t, 5> write_txn_rolled_back{};
  uint64_t rows_written = 0;
  uint64_t writes_undone = 0;

  // Catalog statistics refresh.
  uint64_t stats_refreshes = 0;
  uint64_t stats_refresh_errors = 0;

  // The policy engine's kept plans (session/statement_policy.h), copied from it when published.
  uint64_t plan_cache_hits = 0;
  uint64_t plan_cache_misses = 0;
  uint64_t plan_shape_hits = 0;  // only the guards that read literals ran

  // History.
  uint64_t history_submitted = 0;
  uint64_t history_dropped = 0;          // submit() refused (queue full)

  void reject(RejectReason r) { ++clients_rejected[static_cast<size_t>(r)]; }
  void connectError(ConnectFailure f) {
    ++server_connect_errors;
    ++server_connect_errors_by_reason[static_cast<size_t>(f)];
  }
  void statement(Outcome o) { ++statements[static_cast<size_t>(o)]; }
  uint64_t statementTotal(Outcome o) const {
    return statements[static_cast<size_t>(o)];
  }
  void serverLogin(bool ok, uint64_t now_ms) {
    last_server_login = ok ? 1 : 0;
    last_server_login_ms = now_ms;
  }
  // Adds another loop's counters (gauges and totals alike; the last login is the later one).
  Counters& operator+=(const Counters& o);
};

// The index into server_errors_by_class for a SQLSTATE ("57014" -> class "57"); -1 if malformed.
int sqlstateClass(const char* sqlstate, size_t len);
// The two-character class name for an index ("57").
void sqlstateClassName(int index, char out[3]);

}  // namespace pgwarden::metrics
