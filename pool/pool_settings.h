// What the pools read of the configuration: the upstream and pool sections and what the guarded
// write groups ask of the write pool's connections. The daemon builds it from its Config at
// start and on each reload (daemon/config.h); connections keep the one they were opened with.
#pragma once

#include "net/net_config.h"

namespace pgwarden::pool {

// How long a client holds a server connection: its whole session, or one transaction (a
// statement outside BEGIN is a transaction of its own). docs/operations.md.
enum class PoolMode : uint8_t { kSession, kTransaction };

struct PoolConfig {
  int min_size = 0;
  int max_size = 20;
  net::Millis acquire_timeout{5000};
  net::Millis idle_timeout{600000};
  PoolMode mode = PoolMode::kSession;  // groups may override it (groups.NAME.pool_mode)
  // Transaction mode: prepared statements kept per server connection (least recently used
  // closed first), as PgBouncer's max_prepared_statements.
  int max_prepared_statements = 200;
};

struct PoolSettings {
  net::UpstreamConfig upstream;
  PoolConfig pool;
  // The write pool's idle_in_transaction_session_timeout: the longest transaction_idle_timeout
  // of the guarded_writes groups plus a margin (pgwarden rolls idle transactions back itself;
  // the server's timeout is the backstop a little later); 0 when no group writes.
  net::Millis write_idle_in_transaction{0};
};

}  // namespace pgwarden::pool
