// The listen and upstream sections of the configuration (daemon/config.h parses them): where
// pgwarden accepts clients and how it reaches PostgreSQL.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/tls.h"

namespace pgwarden::net {

using Millis = std::chrono::milliseconds;

struct ListenAddress {
  std::string host;  // an IP literal ("127.0.0.1", "::1", "0.0.0.0", "::")
  int port = 0;
};

struct ListenConfig {
  std::vector<ListenAddress> addresses;
  std::string unix_socket_dir;  // "" disables the Unix socket
  int unix_socket_port = 0;     // the <port> in .s.PGSQL.<port>
  // Applied to the socket file after bind (chmod), so a service's UMask does not decide who may
  // connect; PgBouncer's unix_socket_mode / unix_socket_group.
  unsigned unix_socket_mode = 0777;
  std::string unix_socket_group;  // "" leaves the group as created
  // SO_REUSEPORT on the TCP listeners: several processes share a port and the kernel spreads
  // new connections over them; SIGTERM then lets connected clients finish (rolling restarts).
  bool so_reuseport = false;
};

// A read replica of the upstream (a streaming standby of the same cluster): it serves every
// database the primary does.
struct UpstreamHost {
  std::string host;  // as upstream.host: hostname, IP or socket directory
  int port = 5432;
  // "host:port", as SHOW SERVERS, SHOW DATABASES and the metrics' host label name it.
  std::string name() const { return host + ":" + std::to_string(port); }
};

struct UpstreamConfig {
  std::string host = "127.0.0.1";  // hostname, IP, or a directory holding the server's socket
  int port = 5432;
  std::string user;
  std::string password;            // from `password` or `password_file`; never logged
  std::string password_file;       // as configured (resolved), "" when not used
  // The write pool's role (guarded_writes groups only; docs/writes.md) and its password.
  std::string write_user;
  std::string write_password;      // never logged
  std::string write_password_file;
  // Client database name -> server database name. Empty: names pass as they are. "*" -> "*"
  // admits any other name unchanged.
  std::map<std::string, std::string, std::less<>> databases;
  Millis connect_timeout{5000};
  Millis login_retry{2000};
  Millis statement_timeout{10000};
  Millis lock_timeout{3000};
  Millis idle_in_transaction_session_timeout{15000};
  Millis stats_refresh{300000};    // catalog statistics refresh period (0: at start-up only)
  UpstreamTlsConfig tls;           // `sslmode` and `sslrootcert`, libpq's meanings
  // Read replicas (docs/operations.md, "Read replicas"): the groups with read_replicas: true
  // read from one whose replay lag is under max_replica_lag; writes stay on the primary.
  std::vector<UpstreamHost> replicas;
  Millis max_replica_lag{10000};
  Millis health_check_interval{1000};  // how often a thread checks every host
  std::string health_check_database = "postgres";

  bool hostIsSocketDir() const { return !host.empty() && host.front() == '/'; }
  // The server database for a client's database name; nullopt when the map refuses it.
  std::optional<std::string> mapDatabase(std::string_view client_db) const;
};

}  // namespace pgwarden::net
