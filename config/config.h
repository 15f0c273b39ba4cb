// The configuration's schema: what the YAML file says, as plain structs. daemon/config.h parses
// the file once, strictly, into an immutable Config that sessions hold through a shared_ptr; a
// reload parses a new one and swaps the pointer. This module parses nothing, so the sessions
// and the MCP endpoint, below the daemon, read their settings without reaching up into it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/metrics_endpoint.h"
#include "net/net_config.h"
#include "net/tls.h"
#include "guards/policy.h"
#include "history/recorder.h"
#include "config/mcp_section.h"
#include "pool/pool_settings.h"

namespace pgwarden::config {

struct LimitsConfig {
  int max_client_connections = 1000;
  // Connections still in startup or authentication: at most this many at once, and at most
  // max_startup_per_address from one address (IPv6: one /64; 0: no per-address cap). Unix
  // socket clients count towards the first only.
  int max_startup_connections = 64;
  int max_startup_per_address = 16;
  // Client slots that connections still starting up never take: however many of them there
  // are, this many slots stay for sessions that have logged in. Default: 10, or a tenth of
  // max_client_connections when that is smaller.
  int reserved_authenticated = 10;
  uint64_t max_message_bytes = 1u << 20;
  uint64_t max_bind_bytes = 64u << 20;
  net::Millis startup_timeout{10000};
  net::Millis client_idle_timeout{0};
  // A client that takes none of its results for this long while they hold its server
  // connection (pgwarden stopped reading the server for it) is closed and the statement
  // cancelled (0: never).
  net::Millis client_stall_timeout{30000};
  net::Millis shutdown_timeout{30000};
  uint64_t client_write_buffer = 256u << 10;
  int max_prepared_statements = 10000;  // per session: named statements and portals tracked

  // How many connections may be in startup or authentication at once: max_startup_connections,
  // less when the reserve for logged-in sessions needs the slots; at least 1.
  int startupCap() const;
};

enum class AuthMethod { kScramSha256, kMd5, kTrust };
const char* authMethodName(AuthMethod m);

struct AuthConfig {
  // Failed logins per minute of one credential (a user name, an MCP token) from one address;
  // past it that credential is refused there for the minute, others still log in.
  int failed_attempts_per_minute = 20;
  // Failed logins per minute from one address, whatever the credential: past it the address is
  // refused for the minute. A client retrying one wrong credential stops counting at the limit
  // above, so only an address guessing through many credentials gets here.
  int failed_attempts_per_address = 500;
  // The challenge a user who is not in `users` gets, as PostgreSQL answers a missing role with
  // its password_encryption method: scram-sha-256 or md5.
  AuthMethod unknown_user_method = AuthMethod::kScramSha256;
  // The key unknown users' made-up salts are derived from: `salt_key` when set, else the file
  // `salt_key_file` (default <daemon.state_dir>/salt.key), created at first start.
  std::string salt_key;
  std::string salt_key_file;  // resolved path
  // Not keys: taken from the SCRAM users (the commonest iteration count and salt length), so an
  // unknown user's server-first-message looks like a real user's.
  int unknown_scram_iterations = 4096;
  size_t unknown_scram_salt_len = 16;
};

struct DaemonSection {
  // Where the process keeps state that must outlive it (the salt key; the history by default).
  std::string state_dir = "/var/lib/pgwarden";
  // Event loops serving client connections (`workers: auto|N`, docs/operations.md): 1 keeps one
  // loop, as PgBouncer does; auto (what a config that does not say gets) is one per CPU the
  // process may run on. Fixed at start-up. A section built in code keeps one.
  int workers = 1;
  static constexpr int kMaxWorkers = 64;
};

struct UserConfig {
  std::string name;
  AuthMethod method = AuthMethod::kScramSha256;
  std::string secret;  // SCRAM verifier or "md5..." hash; empty for trust
  std::string group;
  int line = 0;        // where the entry is, for messages
};

struct ClientParametersConfig {
  // Groups whose users may set search_path in the startup packet.
  std::vector<std::string> allow_search_path;
};

struct LoggingConfig {
  std::string level = "info";
  // "text" (the default) or "json": one JSON object per line (read at start-up).
  std::string format = "text";
};

struct Config {
  std::string path;         // the file it came from
  std::string instance_id;  // names this process in history records (default: host name)
  DaemonSection daemon;
  net::ListenConfig listen;
  net::UpstreamConfig upstream;
  pool::PoolConfig pool;
  LimitsConfig limits;
  AuthConfig auth;
  ClientParametersConfig client_parameters;
  std::vector<UserConfig> users;
  std::vector<std::string> admin_users;
  // Users that may open the admin console to read it (SHOW only), as PgBouncer's stats_users.
  std::vector<std::string> stats_users;
  LoggingConfig logging;
  net::TlsConfig
      tls;  // client-side TLS; its SSL_CTX is rebuilt by every load, so a reload renews it
  net::MetricsEndpointOptions metrics;  // `metrics:`, parsed by the metrics module
  config::McpConfig mcp;                // `mcp:`, parsed by the mcp module (off by default)
  history::HistoryConfig history;
  guards::PolicyMap groups;
  // Problems that do not stop the daemon (a password file not there yet): printed by
  // --check-config and logged at start-up.
  std::vector<std::string> warnings;

  const UserConfig* findUser(std::string_view name) const;
  const guards::PolicyGroup* findGroup(std::string_view name) const;
  bool groupAllowsSearchPath(std::string_view group) const;
  bool isAdmin(std::string_view user) const;
  bool isStatsUser(std::string_view user) const;
};

// What the pools read of `config` (pool/pool_settings.h).
std::shared_ptr<const pool::PoolSettings> poolSettings(const Config& config);

}  // namespace pgwarden::config
