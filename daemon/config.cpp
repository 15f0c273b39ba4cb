// Parses and validates the daemon's YAML config. Each section is checked key by key with the
// strict helpers of common/config_util.h; cross-references (a user's group, admin users) are
// checked once everything is read. `groups:` belongs to guards, `history:` to history.
#include "daemon/config.h"

#include <arpa/inet.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "common/config_env.h"
#include "common/config_util.h"
#include "budgets/guard_kinds.h"
#include "guards/webhook_guard.h"
#include "history/spool.h"
#include "history/store_path.h"
#include "mcp/mcp_config.h"
#include "mcp/operator_tools.h"
#include "mcp/tools.h"
#include "protocol/auth.h"

namespace pgwarden::daemon {

namespace cfg = pgwarden::config;

namespace {

bool isIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool isMd5Hash(const std::string& s) {
  if (s.size() != 35 || s.compare(0, 3, "md5") != 0) return false;
  return std::all_of(s.begin() + 3, s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
  });
}

// "0770", "770" or "0o770": octal permission bits, nothing above 0777 (no setuid/sticky bits).
std::optional<unsigned> parseFileMode(const std::string& text) {
  std::string_view digits = text;
  if (digits.size() > 2 && digits[0] == '0' && digits[1] == 'o') digits.remove_prefix(2);
  if (digits.size() < 3 || digits.size() > 4) return std::nullopt;
  unsigned mode = 0;
  for (char c : digits) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<unsigned>(c - '0');
  }
  if (mode > 0777) return std::nullopt;
  return mode;
}

void parseListen(const YAML::Node& n, net::ListenConfig& out) {
  if (!n.IsDefined() || n.IsNull()) {
    out.addresses.push_back({"127.0.0.1", 6432});
    out.unix_socket_port = 6432;
    return;
  }
  cfg::checkKeys(n, "listen",
                 {"addresses", "unix_socket_dir", "unix_socket_port", "unix_socket_mode",
                  "unix_socket_group", "so_reuseport"});
  out.so_reuseport = cfg::getBool(n, "listen", "so_reuseport", false);
  const auto list = cfg::getStringList(n, "listen", "addresses");
  for (size_t i = 0; i < list.size(); ++i) {
    auto parsed = parseListenAddress(list[i]);
    if (!parsed) cfg::fail(n["addresses"], "listen.addresses", parsed.error());
    for (auto& a : *parsed) out.addresses.push_back(a);
  }
  out.unix_socket_dir = cfg::getString(n, "listen", "unix_socket_dir", "");
  if (!out.unix_socket_dir.empty() && out.unix_socket_dir.front() != '/') {
    cfg::fail(n["unix_socket_dir"], "listen.unix_socket_dir", "must be an absolute directory");
  }
  const int first_port = out.addresses.empty() ? 6432 : out.addresses.front().port;
  out.unix_socket_port =
      static_cast<int>(cfg::getInt(n, "listen", "unix_socket_port", first_port, 1, 65535));
  if (out.addresses.empty() && out.unix_socket_dir.empty()) {
    cfg::fail(n, "listen", "no TCP address and no unix_socket_dir: nothing to listen on");
  }
  if (n["unix_socket_mode"].IsDefined()) {
    // Read as written (0770 unquoted is still "0770" here) and taken as octal, as chmod does.
    const std::string text = cfg::getString(n, "listen", "unix_socket_mode", "");
    const auto mode = parseFileMode(text);
    if (!mode) {
      cfg::fail(n["unix_socket_mode"], "listen.unix_socket_mode",
                "expected an octal mode from 0000 to 0777 like 0770, got \"" + text + "\"");
    }
    out.unix_socket_mode = *mode;
  }
  out.unix_socket_group = cfg::getString(n, "listen", "unix_socket_group", "");
  if (n["unix_socket_group"].IsDefined() && out.unix_socket_group.empty()) {
    cfg::fail(n["unix_socket_group"], "listen.unix_socket_group",
              "must name a group (leave the key out to keep the default group)");
  }
}

// upstream.replicas: a list of {host, port} (port defaults to the primary's), and how they are
// checked and chosen.
void parseReplicas(const YAML::Node& n, net::UpstreamConfig& out) {
  const YAML::Node list = n["replicas"];
  if (list.IsDefined() && !list.IsNull()) {
    cfg::requireSequence(list, "upstream.replicas");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = "upstream.replicas[" + std::to_string(i) + "]";
      cfg::requireMap(list[i], path);
      cfg::checkKeys(list[i], path, {"host", "port"});
      net::UpstreamHost h;
      h.host = cfg::getString(list[i], path, "host", "");
      if (h.host.empty()) cfg::fail(list[i], path + ".host", "every replica needs a host");
      h.port = static_cast<int>(cfg::getInt(list[i], path, "port", out.port, 1, 65535));
      if ((h.host == out.host && h.port == out.port) ||
          std::any_of(out.replicas.begin(), out.replicas.end(),
                      [&h](const net::UpstreamHost& o) { return o.name() == h.name(); })) {
        cfg::fail(list[i], path, h.name() + " is listed twice (the primary is upstream.host)");
      }
      out.replicas.push_back(std::move(h));
    }
  }
  out.max_replica_lag = cfg::getDuration(n, "upstream", "max_replica_lag", out.max_replica_lag);
  if (out.max_replica_lag.count() <= 0) {
    // A replica qualifies while its lag is under the limit: 0 would read from none, silently.
    cfg::fail(n["max_replica_lag"], "upstream.max_replica_lag",
              "must be more than 0 (to read from no replica, leave upstream.replicas out)");
  }
  out.health_check_interval =
      cfg::getDuration(n, "upstream", "health_check_interval", out.health_check_interval);
  if (out.health_check_interval.count() < 100) {
    cfg::fail(n["health_check_interval"], "upstream.health_check_interval",
              "must be at least 100ms");
  }
  out.health_check_database =
      cfg::getString(n, "upstream", "health_check_database", out.health_check_database);
}

void parseUpstream(const YAML::Node& n, const std::string& config_path, net::UpstreamConfig& out,
                   std::vector<std::string>& warnings) {
  if (!n.IsDefined() || n.IsNull()) cfg::fail(n, "upstream", "the upstream section is required");
  cfg::checkKeys(n, "upstream",
                 {"host", "port", "user", "password", "password_file", "databases",
                  "connect_timeout", "login_retry", "statement_timeout", "lock_timeout",
                  "idle_in_transaction_session_timeout", "stats_refresh", "sslmode",
                  "sslrootcert", "write_user", "write_password", "write_password_file",
                  "replicas", "max_replica_lag", "health_check_interval",
                  "health_check_database"});
  out.host = cfg::getString(n, "upstream", "host", out.host);
  if (out.host.empty()) cfg::fail(n["host"], "upstream.host", "must not be empty");
  out.port = static_cast<int>(cfg::getInt(n, "upstream", "port", out.port, 1, 65535));
  out.user = cfg::getString(n, "upstream", "user", "");
  if (out.user.empty()) cfg::fail(n, "upstream.user", "the server role is required");
  const auto password = cfg::getOptionalString(n, "upstream", "password");
  const auto password_file = cfg::getOptionalString(n, "upstream", "password_file");
  if (password && password_file) {
    cfg::fail(n["password_file"], "upstream.password_file",
              "set either password or password_file, not both");
  }
  if (password) out.password = *password;
  if (password_file) {
    out.password_file = cfg::resolveRelative(config_path, *password_file);
    if (::access(out.password_file.c_str(), F_OK) != 0) {
      // Packaged configs name the file before the operator has written it: say so, and let
      // server logins fail with this reason until it exists and the config is reloaded.
      warnings.push_back(config_path + ":" + std::to_string(cfg::lineOf(n["password_file"])) +
                         ": upstream.password_file: " + out.password_file +
                         " does not exist yet; server logins that need a password will fail");
    } else {
      out.password = cfg::readSecretFile(n["password_file"], "upstream.password_file",
                                         out.password_file);
    }
  }
  // The write pool's role (docs/writes.md): only for guarded_writes groups, never the read-only
  // role (whose connections are opened read-only).
  out.write_user = cfg::getString(n, "upstream", "write_user", "");
  if (!out.write_user.empty() && out.write_user == out.user) {
    cfg::fail(n["write_user"], "upstream.write_user",
              "must be a role other than upstream.user: the read-only role is never used for writes");
  }
  const auto write_password = cfg::getOptionalString(n, "upstream", "write_password");
  const auto write_password_file = cfg::getOptionalString(n, "upstream", "write_password_file");
  if (write_password && write_password_file) {
    cfg::fail(n["write_password_file"], "upstream.write_password_file",
              "set either write_password or write_password_file, not both");
  }
  if ((write_password || write_password_file) && out.write_user.empty()) {
    cfg::fail(n, "upstream.write_user", "a write password needs upstream.write_user");
  }
  if (write_password) out.write_password = *write_password;
  if (write_password_file) {
    out.write_password_file = cfg::resolveRelative(config_path, *write_password_file);
    out.write_password = cfg::readSecretFile(n["write_password_file"], "upstream.write_password_file",
                                             out.write_password_file);
  }
  const YAML::Node dbs = n["databases"];
  if (dbs.IsDefined() && !dbs.IsNull()) {
    cfg::requireMap(dbs, "upstream.databases");
    for (const auto& kv : dbs) {
      const std::string key = kv.first.as<std::string>();
      if (!kv.second.IsScalar() || kv.second.as<std::string>().empty()) {
        cfg::fail(kv.second, "upstream.databases." + key, "expected a server database name");
      }
      const std::string value = kv.second.as<std::string>();
      if (key == "*" && value != "*") {
        cfg::fail(kv.second, "upstream.databases.*",
                  "\"*\" admits any other name unchanged; its value must be \"*\"");
      }
      out.databases[key] = value;
    }
  }
  const auto dur = [&](const char* key, net::Millis& field) {
    field = cfg::getDuration(n, "upstream", key, field);
  };
  dur("connect_timeout", out.connect_timeout);
  dur("login_retry", out.login_retry);
  dur("statement_timeout", out.statement_timeout);
  dur("lock_timeout", out.lock_timeout);
  dur("idle_in_transaction_session_timeout", out.idle_in_transaction_session_timeout);
  dur("stats_refresh", out.stats_refresh);
  if (out.connect_timeout.count() == 0) {
    cfg::fail(n["connect_timeout"], "upstream.connect_timeout", "must be above 0");
  }
  parseReplicas(n, out);
}

void parsePool(const YAML::Node& n, pool::PoolConfig& out) {
  if (!n.IsDefined() || n.IsNull()) return;
  cfg::checkKeys(n, "pool", {"min_size", "max_size", "acquire_timeout", "idle_timeout", "mode",
                             "max_prepared_statements"});
  out.max_size = static_cast<int>(cfg::getInt(n, "pool", "max_size", out.max_size, 1, 100000));
  out.min_size =
      static_cast<int>(cfg::getInt(n, "pool", "min_size", out.min_size, 0, out.max_size));
  out.acquire_timeout = cfg::getDuration(n, "pool", "acquire_timeout", out.acquire_timeout);
  out.idle_timeout = cfg::getDuration(n, "pool", "idle_timeout", out.idle_timeout);
  const std::string mode = cfg::getString(n, "pool", "mode", "session");
  if (mode != "session" && mode != "transaction") {
    cfg::fail(n["mode"], "pool.mode", "expected session or transaction, got '" + mode + "'");
  }
  out.mode = mode == "transaction" ? pool::PoolMode::kTransaction : pool::PoolMode::kSession;
  out.max_prepared_statements = static_cast<int>(cfg::getInt(
      n, "pool", "max_prepared_statements", out.max_prepared_statements, 1, 100000));
  if (out.acquire_timeout.count() == 0) {
    cfg::fail(n["acquire_timeout"], "pool.acquire_timeout", "must be above 0");
  }
}

void parseLimits(const YAML::Node& n, config::LimitsConfig& out) {
  if (!n.IsDefined() || n.IsNull()) return;
  cfg::checkKeys(n, "limits",
                 {"max_client_connections", "max_startup_connections",
                  "max_startup_per_address", "reserved_authenticated", "max_message_bytes",
                  "max_bind_bytes", "startup_timeout", "client_idle_timeout",
                  "client_stall_timeout", "shutdown_timeout", "client_write_buffer",
                  "max_prepared_statements"});
  out.max_client_connections = static_cast<int>(cfg::getInt(
      n, "limits", "max_client_connections", out.max_client_connections, 1, 1000000));
  out.max_startup_connections = static_cast<int>(cfg::getInt(
      n, "limits", "max_startup_connections", out.max_startup_connections, 1, 1000000));
  out.max_startup_per_address = static_cast<int>(cfg::getInt(
      n, "limits", "max_startup_per_address", out.max_startup_per_address, 0, 1000000));
  out.reserved_authenticated = std::min(out.reserved_authenticated,
                                        out.max_client_connections / 10);
  if (n["reserved_authenticated"].IsDefined()) {
    out.reserved_authenticated = static_cast<int>(
        cfg::getInt(n, "limits", "reserved_authenticated", 0, 0, 1000000));
    if (out.reserved_authenticated >= out.max_client_connections) {
      cfg::fail(n["reserved_authenticated"], "limits.reserved_authenticated",
                "must be below limits.max_client_connections (" +
                    std::to_string(out.max_client_connections) + ")");
    }
  }
  out.max_message_bytes = cfg::getSize(n, "limits", "max_message_bytes", out.max_message_bytes);
  out.max_bind_bytes = cfg::getSize(n, "limits", "max_bind_bytes", out.max_bind_bytes);
  const auto sizeRange = [&](const char* key, uint64_t v, uint64_t lo, uint64_t hi) {
    if (v < lo || v > hi) {
      cfg::fail(n[key], std::string("limits.") + key,
                "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                    " bytes");
    }
  };
  sizeRange("max_message_bytes", out.max_message_bytes, 1024, 1u << 30);
  sizeRange("max_bind_bytes", out.max_bind_bytes, 1024, 1u << 30);
  out.startup_timeout = cfg::getDuration(n, "limits", "startup_timeout", out.startup_timeout);
  out.client_idle_timeout =
      cfg::getDuration(n, "limits", "client_idle_timeout", out.client_idle_timeout);
  out.client_stall_timeout =
      cfg::getDuration(n, "limits", "client_stall_timeout", out.client_stall_timeout);
  if (out.client_stall_timeout.count() > 0 && out.client_stall_timeout.count() < 1000) {
    // A network hiccup stalls a healthy client for a moment; closing it for that is worse
    // than the connection it holds.
    cfg::fail(n["client_stall_timeout"], "limits.client_stall_timeout",
              "must be 0 (off) or at least 1s");
  }
  out.shutdown_timeout = cfg::getDuration(n, "limits", "shutdown_timeout", out.shutdown_timeout);
  out.client_write_buffer =
      cfg::getSize(n, "limits", "client_write_buffer", out.client_write_buffer);
  sizeRange("client_write_buffer", out.client_write_buffer, 4096, 1u << 30);
  out.max_prepared_statements = static_cast<int>(cfg::getInt(
      n, "limits", "max_prepared_statements", out.max_prepared_statements, 1, 10000000));
  if (out.startup_timeout.count() == 0) {
    cfg::fail(n["startup_timeout"], "limits.startup_timeout", "must be above 0");
  }
}

// One loop per CPU this process may run on (its affinity mask, so a container's or a
// CPUAffinity= limit counts), within the cap.
int autoWorkers() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(n, 1, config::DaemonSection::kMaxWorkers);
}

void parseDaemonSection(const YAML::Node& n, const std::string& config_path,
                        config::DaemonSection& out) {
  // Unset: one loop per CPU the process may run on (docs/operations.md, "Worker loops").
  out.workers = autoWorkers();
  if (!n.IsDefined() || n.IsNull()) return;
  cfg::checkKeys(n, "daemon", {"state_dir", "workers"});
  if (const YAML::Node w = n["workers"]; w.IsDefined() && !w.IsNull()) {
    if (w.IsScalar() && w.Scalar() == "auto") {
      out.workers = autoWorkers();
    } else {
      const int64_t v =
          cfg::getInt(n, "daemon", "workers", 1, 1, config::DaemonSection::kMaxWorkers);
      out.workers = static_cast<int>(v);
    }
  }
  out.state_dir =
      cfg::resolveRelative(config_path, cfg::getString(n, "daemon", "state_dir", out.state_dir));
  if (out.state_dir.empty()) cfg::fail(n["state_dir"], "daemon.state_dir", "must not be empty");
  while (out.state_dir.size() > 1 && out.state_dir.back() == '/') out.state_dir.pop_back();
}

// A salt key shorter than this could be guessed, and with it every unknown user's salt.
constexpr size_t kMinSaltKeyBytes = 16;

void parseAuth(const YAML::Node& n, const std::string& config_path, const std::string& state_dir,
               config::AuthConfig& out) {
  out.salt_key_file = state_dir + "/salt.key";
  if (!n.IsDefined() || n.IsNull()) return;
  cfg::checkKeys(n, "auth",
                 {"failed_attempts_per_minute", "failed_attempts_per_address",
                  "unknown_user_method", "salt_key", "salt_key_file"});
  out.failed_attempts_per_minute = static_cast<int>(cfg::getInt(
      n, "auth", "failed_attempts_per_minute", out.failed_attempts_per_minute, 1, 1000000));
  out.failed_attempts_per_address = static_cast<int>(cfg::getInt(
      n, "auth", "failed_attempts_per_address", out.failed_attempts_per_address, 1, 1000000));
  const std::string method = cfg::getString(n, "auth", "unknown_user_method", "scram-sha-256");
  if (method == "scram-sha-256") {
    out.unknown_user_method = config::AuthMethod::kScramSha256;
  } else if (method == "md5") {
    out.unknown_user_method = config::AuthMethod::kMd5;
  } else {
    cfg::fail(n["unknown_user_method"], "auth.unknown_user_method",
              "unknown method '" + method + "' (scram-sha-256 or md5)");
  }
  const auto key = cfg::getOptionalString(n, "auth", "salt_key");
  const auto key_file = cfg::getOptionalString(n, "auth", "salt_key_file");
  if (key && key_file) {
    cfg::fail(n["salt_key_file"], "auth.salt_key_file",
              "set either salt_key or salt_key_file, not both");
  }
  if (key) {
    if (key->size() < kMinSaltKeyBytes) {
      cfg::fail(n["salt_key"], "auth.salt_key",
                "must be at least " + std::to_string(kMinSaltKeyBytes) + " characters");
    }
    out.salt_key = *key;
    out.salt_key_file.clear();
  }
  if (key_file) {
    if (key_file->empty()) cfg::fail(n["salt_key_file"], "auth.salt_key_file", "must not be empty");
    out.salt_key_file = cfg::resolveRelative(config_path, *key_file);
  }
}

// The commonest value in `counts` (the smallest on a tie), or `fallback` when there is none.
template <typename T>
T commonest(const std::map<T, int>& counts, T fallback) {
  int best = 0;
  for (const auto& [value, n] : counts) {
    if (n > best) {
      best = n;
      fallback = value;
    }
  }
  return fallback;
}

// Makes an unknown user's SCRAM challenge look like the real users': their commonest iteration
// count and salt length (PostgreSQL's 4096 and 16 bytes when there are no SCRAM users).
void shapeUnknownUserScram(const std::vector<config::UserConfig>& users, config::AuthConfig& auth) {
  std::map<int, int> iterations;
  std::map<size_t, int> salt_lengths;
  for (const auto& u : users) {
    if (u.method != config::AuthMethod::kScramSha256) continue;
    auto v = protocol::parseScramVerifier(u.secret);
    if (!v) continue;
    ++iterations[v->iterations];
    ++salt_lengths[v->salt.size()];
  }
  auth.unknown_scram_iterations = commonest(iterations, 4096);
  auth.unknown_scram_salt_len = std::min<size_t>(commonest(salt_lengths, size_t{16}), 32);
}

// Users whose challenge differs from an unknown user's can be told apart from names that do not
// exist: say who they are, and what would close the gap. Trust users are left out: over TCP they
// are answered as unknown users, over the Unix socket they get in.
void warnAboutRevealedUsers(const YAML::Node& auth_node, const std::string& config_path,
                            const std::vector<config::UserConfig>& users,
                            const config::AuthConfig& auth, std::vector<std::string>& warnings) {
  std::string names;
  size_t count = 0;
  for (const auto& u : users) {
    if (u.method == config::AuthMethod::kTrust || u.method == auth.unknown_user_method) continue;
    if (++count <= 5) names += (names.empty() ? "\"" : ", \"") + u.name + "\"";
  }
  if (count == 0) return;
  if (count > 5) names += " and " + std::to_string(count - 5) + " more";
  const bool md5_users = auth.unknown_user_method == config::AuthMethod::kScramSha256;
  const int line = auth_node.IsDefined() ? cfg::lineOf(auth_node["unknown_user_method"]) : 0;
  std::string w =
      config_path + (line > 0 ? ":" + std::to_string(line) : "") + ": auth.unknown_user_method: ";
  if (md5_users) {
    w += "md5 reveals which users exist: " + names + (count == 1 ? " uses" : " use") +
         " md5 and always gets the md5 challenge, while a user who does not exist gets "
         "SCRAM-SHA-256; give " +
         (count == 1 ? "it a SCRAM verifier" : "them SCRAM verifiers") +
         " (pgwarden passwd USER), or set auth.unknown_user_method: md5 if most users use md5";
  } else {
    w += "is md5, so SCRAM users can be told from users who do not exist: " + names +
         (count == 1 ? " gets" : " get") +
         " the SCRAM-SHA-256 challenge while unknown users get md5";
  }
  warnings.push_back(std::move(w));
}

void parseClientParameters(const YAML::Node& n, config::ClientParametersConfig& out) {
  if (!n.IsDefined() || n.IsNull()) return;
  cfg::checkKeys(n, "client_parameters", {"allow_search_path"});
  out.allow_search_path = cfg::getStringList(n, "client_parameters", "allow_search_path");
}

config::UserConfig parseUser(const YAML::Node& n, size_t index) {
  const std::string path = "users[" + std::to_string(index) + "]";
  cfg::checkKeys(n, path, {"name", "password", "method", "group"});
  config::UserConfig u;
  u.line = cfg::lineOf(n);
  u.name = cfg::getString(n, path, "name", "");
  if (u.name.empty()) cfg::fail(n, path + ".name", "a user needs a name");
  u.group = cfg::getString(n, path, "group", "");
  if (u.group.empty()) cfg::fail(n, path + ".group", "user \"" + u.name + "\" needs a group");
  u.secret = cfg::getString(n, path, "password", "");
  const auto method = cfg::getOptionalString(n, path, "method");
  if (method) {
    if (*method == "scram-sha-256") {
      u.method = config::AuthMethod::kScramSha256;
    } else if (*method == "md5") {
      u.method = config::AuthMethod::kMd5;
    } else if (*method == "trust") {
      u.method = config::AuthMethod::kTrust;
    } else {
      cfg::fail(n["method"], path + ".method",
                "unknown method '" + *method + "' (scram-sha-256, md5 or trust)");
    }
  } else {
    u.method = isMd5Hash(u.secret) ? config::AuthMethod::kMd5 : config::AuthMethod::kScramSha256;
  }
  if (u.method == config::AuthMethod::kTrust) {
    if (!u.secret.empty()) {
      cfg::fail(n["password"], path + ".password", "a trust user takes no password");
    }
    return u;
  }
  if (u.secret.empty()) {
    cfg::fail(n, path + ".password",
              "user \"" + u.name + "\" needs a password (a SCRAM-SHA-256 verifier from "
              "`pgwarden passwd " + u.name + "`, or an md5 hash)");
  }
  const bool is_scram = u.secret.rfind("SCRAM-SHA-256$", 0) == 0;
  if (is_scram) {
    auto v = protocol::parseScramVerifier(u.secret);
    if (!v) cfg::fail(n["password"], path + ".password", "invalid SCRAM-SHA-256 verifier");
    // PostgreSQL does the same: with a SCRAM verifier stored, an md5 user proves it by SCRAM.
    u.method = config::AuthMethod::kScramSha256;
  } else if (isMd5Hash(u.secret)) {
    if (u.method == config::AuthMethod::kScramSha256) {
      cfg::fail(n["password"], path + ".password",
                "method scram-sha-256 needs a SCRAM-SHA-256 verifier, not an md5 hash");
    }
  } else {
    cfg::fail(n["password"], path + ".password",
              "expected a SCRAM-SHA-256 verifier (from `pgwarden passwd " + u.name +
                  "`) or an md5 hash (\"md5\" followed by 32 hex digits); plain passwords are "
                  "not accepted");
  }
  return u;
}

void parseUsers(const YAML::Node& n, std::vector<config::UserConfig>& out) {
  if (!n.IsDefined() || n.IsNull()) return;
  cfg::requireSequence(n, "users");
  std::set<std::string> seen;
  size_t i = 0;
  for (const auto& item : n) {
    config::UserConfig u = parseUser(item, i);
    if (!seen.insert(u.name).second) {
      cfg::fail(item["name"], "users[" + std::to_string(i) + "].name",
                "user \"" + u.name + "\" is listed twice");
    }
    out.push_back(std::move(u));
    ++i;
  }
}

void parseLogging(const YAML::Node& n, config::LoggingConfig& out) {
  if (!n.IsDefined() || n.IsNull()) return;
  cfg::checkKeys(n, "logging", {"level", "format"});
  out.level = cfg::getString(n, "logging", "level", out.level);
  out.format = cfg::getString(n, "logging", "format", out.format);
  if (out.format != "text" && out.format != "json") {
    cfg::fail(n["format"], "logging.format", "unknown format '" + out.format + "' (text, json)");
  }
  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
  if (!kLevels.count(out.level)) {
    cfg::fail(n["level"], "logging.level",
              "unknown level '" + out.level + "' (trace, debug, info, warn, error)");
  }
}

std::string hostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "pgwarden";
  return buf;
}

// mcp.oauth.scopes map to groups that exist.
void checkOAuthGroups(const config::Config& config, const YAML::Node& mcp_node) {
  for (size_t i = 0; i < config.mcp.oauth.scopes.size(); ++i) {
    const auto& s = config.mcp.oauth.scopes[i];
    if (!config.findGroup(s.group)) {
      cfg::fail(mcp_node["oauth"]["scopes"][i]["group"], "mcp.oauth.scopes[" + std::to_string(i) + "].group",
                "group \"" + s.group + "\" is not defined under groups");
    }
  }
}

std::shared_ptr<const config::Config> parseRoot(const YAML::Node& root, const std::string& path) {
  auto config = std::make_shared<config::Config>();
  config->path = path;
  if (!root.IsDefined() || root.IsNull()) cfg::fail(root, "", "the file is empty");
  cfg::checkKeys(root, "",
                 {"instance_id", "daemon", "listen", "upstream", "pool", "limits", "auth",
                  "client_parameters", "users", "admin_users", "stats_users", "logging", "metrics",
                  "history", "groups", "tls", "mcp", "tools"});
  config->instance_id = cfg::getString(root, "", "instance_id", "");
  if (config->instance_id.empty()) config->instance_id = hostName();
  parseDaemonSection(root["daemon"], path, config->daemon);
  parseListen(root["listen"], config->listen);
  parseUpstream(root["upstream"], path, config->upstream, config->warnings);
  config->upstream.tls = net::parseUpstreamTls(root["upstream"], path);
  config->tls = net::parseTlsConfig(root["tls"], path);
  parsePool(root["pool"], config->pool);
  parseLimits(root["limits"], config->limits);
  parseAuth(root["auth"], path, config->daemon.state_dir, config->auth);
  parseClientParameters(root["client_parameters"], config->client_parameters);
  parseUsers(root["users"], config->users);
  shapeUnknownUserScram(config->users, config->auth);
  warnAboutRevealedUsers(root["auth"], path, config->users, config->auth, config->warnings);
  config->admin_users = cfg::getStringList(root, "", "admin_users");
  config->stats_users = cfg::getStringList(root, "", "stats_users");
  parseLogging(root["logging"], config->logging);
  config->metrics = net::parseMetricsConfig(root["metrics"]);
  config->mcp = mcp::parseMcpConfig(root["mcp"], path);
  config->mcp.instance_id = config->instance_id;  // named in write-transaction handles
  if (const std::string& f = config->mcp.handle_key_file; !f.empty()) {
    mcp::loadHandleKey(root["mcp"]["handle_key_file"], cfg::resolveRelative(path, f), config->mcp,
                       config->warnings);
  }
  config->history =
      history::parseHistoryConfig(root["history"], config->daemon.state_dir + "/history.db");
  if (config->metrics.studio && config->history.store != "sqlite" &&
      config->history.store != "postgres") {
    cfg::fail(root["metrics"]["studio"], "metrics.studio",
              "the studio reads a sqlite or postgres history store (history.store is " +
                  config->history.store + ")");
  }

  const YAML::Node groups = root["groups"];
  if (!groups.IsDefined() || groups.IsNull()) {
    cfg::fail(root, "groups", "at least one policy group is required");
  }
  config->groups = budgets::parseAgentPolicyGroups(groups);

  // Cross-references, each reported at the line that names the missing thing.
  const YAML::Node users = root["users"];
  for (size_t i = 0; i < config->users.size(); ++i) {
    const auto& u = config->users[i];
    if (!config->groups.count(u.group)) {
      std::string known;
      for (const auto& [name, g] : config->groups) known += (known.empty() ? "" : ", ") + name;
      cfg::fail(users[i]["group"], "users[" + std::to_string(i) + "].group",
                "user \"" + u.name + "\" names group \"" + u.group +
                    "\", which is not defined under groups (defined: " + known + ")");
    }
  }
  for (const auto& a : config->admin_users) {
    if (!config->findUser(a)) {
      cfg::fail(root["admin_users"], "admin_users",
                "admin user \"" + a + "\" is not defined under users");
    }
  }
  for (const auto& a : config->stats_users) {
    if (!config->findUser(a)) {
      cfg::fail(root["stats_users"], "stats_users",
                "stats user \"" + a + "\" is not defined under users");
    }
  }
  // A guarded_writes group needs the write pool's role; a read-only group never uses it.
  for (const auto& [name, g] : config->groups) {
    if (g->writes().guarded && config->upstream.write_user.empty()) {
      cfg::fail(root["upstream"], "upstream.write_user",
                "group \"" + name + "\" has mode: guarded_writes, which needs upstream.write_user "
                "(a role that may write, not a superuser, other than upstream.user)");
    }
  }
  // MCP tokens and the loopback trust run as configured users.
  const YAML::Node mcp_node = root["mcp"];
  for (size_t i = 0; i < config->mcp.tokens.size(); ++i) {
    const auto& t = config->mcp.tokens[i];
    if (!config->findUser(t.user)) {
      cfg::fail(mcp_node["tokens"][i]["user"], "mcp.tokens[" + std::to_string(i) + "].user",
                "user \"" + t.user + "\" is not defined under users");
    }
  }
  if (!config->mcp.trust_loopback.empty() && !config->findUser(config->mcp.trust_loopback)) {
    cfg::fail(mcp_node["trust_loopback"], "mcp.trust_loopback",
              "user \"" + config->mcp.trust_loopback + "\" is not defined under users");
  }
  checkOAuthGroups(*config, mcp_node);
  if (config->mcp.tls && !config->tls.context) {
    cfg::fail(mcp_node["tls"], "mcp.tls", "needs the tls: section's cert_file and key_file");
  }
  if (config->mcp.enabled() && !config->upstream.mapDatabase(config->mcp.database)) {
    cfg::fail(mcp_node["database"].IsDefined() ? mcp_node["database"] : mcp_node, "mcp.database",
              "database \"" + config->mcp.database + "\" is not mapped by upstream.databases");
  }
  // Operator-defined tools, served over MCP: their groups must exist, their names are not the
  // built-in tools'.
  {
    std::vector<std::string> group_names;
    for (const auto& [name, g] : config->groups) group_names.push_back(name);
    config->mcp.tools = mcp::parseOperatorTools(root["tools"], group_names, mcp::builtinToolNames());
    if (!config->mcp.tools->empty() && !config->mcp.enabled()) {
      config->warnings.push_back("tools: are defined but mcp.listen is not set: no client can call them");
    }
  }
  for (const auto& g : config->client_parameters.allow_search_path) {
    if (!config->groups.count(g)) {
      cfg::fail(root["client_parameters"]["allow_search_path"],
                "client_parameters.allow_search_path",
                "group \"" + g + "\" is not defined under groups");
    }
  }
  return config;
}

std::string formatError(const std::string& path, int line, const std::string& key,
                        const std::string& message) {
  std::string out = path;
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

// What only this machine can answer: whether this process can open or create the files the
// config names. The files read while parsing (TLS certificates and keys, password and secret
// files, Lua scripts) were opened then; the history file is created later, by the store, so it
// is checked here. Not part of parseConfig: tests parse configs that name other machines' paths.
void checkFiles(const config::Config& config) {
  const auto& h = config.history;
  if (auto st = history::checkStorePath(h); !st.ok()) {
    const std::string where = h.path_line > 0 ? "" : " (history.path is not set; this is its default)";
    throw ConfigFileError(formatError(config.path, h.path_line, "history.path", st.error() + where));
  }
  // The spool reserves its whole size at start (a write into a hole of a full file system would
  // be SIGBUS later): a size the file system cannot hold is refused here, not at start-up.
  if (const std::string spool = history::spoolPath(h); !spool.empty()) {
    if (auto st = history::checkSpoolSpace(spool, h.spool_size); !st.ok()) {
      throw ConfigFileError(formatError(config.path, 0, "history.spool_size", st.error()));
    }
  }
}

}  // namespace

Result<std::vector<net::ListenAddress>> parseListenAddress(std::string_view text) {
  const std::string s(text);
  std::string host;
  std::string port_text;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      return Result<std::vector<net::ListenAddress>>::fail("expected \"[ipv6]:port\", got \"" + s +
                                                           "\"");
    }
    host = s.substr(1, close - 1);
    port_text = s.substr(close + 2);
  } else {
    const auto colon = s.rfind(':');
    if (colon == std::string::npos || s.find(':') != colon) {
      return Result<std::vector<net::ListenAddress>>::fail(
          "expected \"host:port\" (IPv6 as \"[::1]:port\"), got \"" + s + "\"");
    }
    host = s.substr(0, colon);
    port_text = s.substr(colon + 1);
  }
  int port = 0;
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
      (port = std::stoi(port_text)) < 1 || port > 65535) {
    return Result<std::vector<net::ListenAddress>>::fail("invalid port in \"" + s + "\"");
  }
  std::vector<net::ListenAddress> out;
  if (host == "*") {
    out.push_back({"0.0.0.0", port});
    out.push_back({"::", port});
  } else if (host == "localhost") {
    out.push_back({"127.0.0.1", port});
    out.push_back({"::1", port});
  } else if (isIpLiteral(host)) {
    out.push_back({host, port});
  } else {
    return Result<std::vector<net::ListenAddress>>::fail(
        "listen host must be an IP address, \"localhost\" or \"*\", got \"" + host + "\"");
  }
  return out;
}

std::shared_ptr<const config::Config> parseConfig(const std::string& text,
                                                  const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigFileError(formatError(path, e.mark.line >= 0 ? e.mark.line + 1 : 0, "",
                                      "invalid YAML: " + e.msg));
  }
  try {
    cfg::rejectDuplicateKeys(root);
    cfg::interpolateEnv(root);
    return parseRoot(root, path);
  } catch (const cfg::ConfigError& e) {
    throw ConfigFileError(formatError(path, e.line(), e.key(), e.what()));
  } catch (const YAML::Exception& e) {
    throw ConfigFileError(formatError(path, e.mark.line >= 0 ? e.mark.line + 1 : 0, "",
                                      e.msg));
  } catch (const ConfigFileError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigFileError(formatError(path, 0, "", e.what()));
  }
}

std::shared_ptr<const config::Config> loadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigFileError(path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  auto config = parseConfig(ss.str(), path);
  checkFiles(*config);
  return config;
}

}  // namespace pgwarden::daemon
