// The admin console's SHOW commands named after PgBouncer's (DATABASES, USERS, MEM, STATE, LISTS,
// SOCKETS, STATS, STATS_TOTALS, STATS_AVERAGES) and SHOW SESSIONS for the MCP endpoint, built
// from every loop's rows (daemon/console_rows.h) and the running configuration.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "daemon/admin_console.h"
#include "daemon/daemon.h"
#include "daemon/daemon_metrics.h"
#include "daemon/worker.h"
#include "metrics/process_metrics.h"
#include "pool/server_conn.h"
#include "session/client_session.h"

namespace pgwarden::daemon {

namespace {

std::string num(uint64_t v) { return std::to_string(v); }
std::string yesNo(bool b) { return b ? "yes" : "no"; }

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

AdminConsole::Table AdminConsole::showDatabases() const {
  Table t{{"name", "host", "port", "database", "pool_size", "min_pool_size", "pool_mode",
           "current_connections", "clients", "paused", "disabled", "replicas"},
          {}};
  const auto& cfg = *home_.config();
  const auto loops = view();
  // The configured names, and every name a client is on now.
  std::set<std::string> names;
  for (const auto& [client_db, server_db] : cfg.upstream.databases) {
    if (client_db != "*") names.insert(client_db);
  }
  std::map<std::string, uint64_t> clients;
  for (const auto& l : loops) {
    for (const auto& c : l.clients) {
      if (c.console) continue;
      names.insert(c.database);
      ++clients[c.database];
    }
  }
  std::map<std::string, uint64_t> connections;  // by server database
  for (const auto& l : loops) {
    for (const auto& p : l.pools) {
      if (!p.internal) connections[p.database] += static_cast<uint64_t>(p.total);
    }
  }
  const auto st = daemon_.control().state();
  const char* mode = cfg.pool.mode == pool::PoolMode::kTransaction ? "transaction" : "session";
  std::string replicas;  // every database is on every replica (they stream the whole cluster)
  for (const auto& r : cfg.upstream.replicas) replicas += (replicas.empty() ? "" : ",") + r.name();
  for (const auto& name : names) {
    const auto server_db = cfg.upstream.mapDatabase(name);
    const std::string db = server_db ? *server_db : kNull;
    t.rows.push_back({name, cfg.upstream.host, std::to_string(cfg.upstream.port), db,
                      std::to_string(cfg.pool.max_size), std::to_string(cfg.pool.min_size), mode,
                      num(server_db ? connections[*server_db] : 0), num(clients[name]),
                      yesNo(st.all_paused || contains(st.paused, name)),
                      yesNo(contains(st.disabled, name)), replicas.empty() ? kNull : replicas});
  }
  // The console's own database, as PgBouncer lists "pgbouncer".
  uint64_t consoles = 0;
  for (const auto& l : loops) {
    for (const auto& c : l.clients) consoles += c.console ? 1 : 0;
  }
  t.rows.push_back({std::string(kDatabase), kNull, kNull, kNull, "0", "0", "statement", "0",
                    num(consoles), "no", "no", kNull});
  return t;
}

// The upstream hosts as the health checker last saw them (upstream.replicas; the primary alone,
// unchecked, without them).
AdminConsole::Table AdminConsole::showHosts() const {
  Table t{{"host", "role", "up", "lag_seconds", "checks", "failures", "last_error"}, {}};
  const pool::HostHealth* health = daemon_.hostHealth();
  if (health == nullptr) {
    const auto& up = home_.config()->upstream;
    t.rows.push_back(
        {up.host + ":" + std::to_string(up.port), "primary", kNull, kNull, "0", "0", kNull});
    return t;
  }
  for (const pool::HostStatus& h : health->snapshot()) {
    t.rows.push_back({h.name, h.replica ? "replica" : "primary", yesNo(h.up),
                      h.lag_ms >= 0 ? fmt::format("{:.3f}", static_cast<double>(h.lag_ms) / 1000.0)
                                    : std::string(kNull),
                      num(h.checks), num(h.failures), h.last_error.empty() ? kNull : h.last_error});
  }
  return t;
}

AdminConsole::Table AdminConsole::showUsers() const {
  Table t{{"name", "group", "pool_mode", "console", "clients"}, {}};
  const auto& cfg = *home_.config();
  std::map<std::string, uint64_t> clients;
  for (const auto& l : view()) {
    for (const auto& c : l.clients) ++clients[c.user];
  }
  for (const auto& u : cfg.users) {
    std::string mode = cfg.pool.mode == pool::PoolMode::kTransaction ? "transaction" : "session";
    if (const auto* g = cfg.findGroup(u.group)) {
      if (!g->poolMode().empty()) mode = g->poolMode();
    }
    const std::string console = cfg.isAdmin(u.name)       ? "admin"
                                : cfg.isStatsUser(u.name) ? "stats"
                                                          : kNull;
    t.rows.push_back({u.name, u.group, mode, console, num(clients[u.name])});
  }
  return t;
}

AdminConsole::Table AdminConsole::showMem() const {
  Table t{{"name", "size", "used", "memtotal"}, {}};
  uint64_t sessions = 0, servers = 0, input = 0, output = 0, mcp = 0;
  for (const auto& l : view()) {
    sessions += l.clients.size();
    servers += l.servers.size();
    mcp += l.mcp_sessions.size();
    for (const auto& c : l.clients) {
      input += c.input_bytes;
      output += c.output_bytes;
    }
  }
  auto objects = [&t](std::string name, uint64_t size, uint64_t used) {
    t.rows.push_back({std::move(name), num(size), num(used), num(size * used)});
  };
  objects("client_sessions", sizeof(session::ClientSession), sessions);
  objects("server_connections", sizeof(pool::ServerConnection), servers);
  // Buffered bytes: each is its own total.
  objects("client_input_bytes", 1, input);
  objects("client_output_bytes", 1, output);
  t.rows.push_back({"mcp_sessions", kNull, num(mcp), kNull});
  const auto p = metrics::readProcessStats();
  t.rows.push_back(
      {"process_resident", kNull, kNull,
       p.resident_memory_bytes ? num(static_cast<uint64_t>(*p.resident_memory_bytes)) : kNull});
  return t;
}

AdminConsole::Table AdminConsole::showState() const {
  Table t{{"key", "value"}, {}};
  const auto st = daemon_.control().state();
  uint64_t held = 0;
  for (const auto& l : view()) {
    for (const auto& c : l.clients) held += c.held ? 1 : 0;
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
    return out;
  };
  const bool paused = st.all_paused || !st.paused.empty();
  t.rows.push_back({"active", yesNo(!paused && !st.suspended && !daemon_.shuttingDown())});
  t.rows.push_back({"paused", yesNo(st.all_paused)});
  t.rows.push_back({"paused_databases", join(st.paused)});
  t.rows.push_back({"suspended", yesNo(st.suspended)});
  t.rows.push_back({"disabled_databases", join(st.disabled)});
  t.rows.push_back({"held_clients", num(held)});
  t.rows.push_back({"shutting_down", yesNo(daemon_.shuttingDown())});
  return t;
}

AdminConsole::Table AdminConsole::showLists() const {
  Table t{{"list", "items"}, {}};
  const auto& cfg = *home_.config();
  uint64_t used = 0, active = 0, held = 0, login = 0, consoles = 0, mcp = 0;
  uint64_t servers = 0, idle = 0, waiting = 0, pools = 0, close_needed = 0;
  std::set<std::string> databases;
  for (const auto& l : view()) {
    mcp += l.mcp_sessions.size();
    for (const auto& c : l.clients) {
      ++used;
      if (c.console)
        ++consoles;
      else
        databases.insert(c.database);
      active += c.busy ? 1 : 0;
      held += c.held ? 1 : 0;
      login += c.cells.size() > 3 && (c.cells[3] == "startup" || c.cells[3] == "auth") ? 1 : 0;
    }
    for (const auto& p : l.pools) {
      ++pools;
      servers += static_cast<uint64_t>(p.total);
      idle += static_cast<uint64_t>(p.idle);
      waiting += static_cast<uint64_t>(p.waiting);
      close_needed += static_cast<uint64_t>(p.close_needed);
    }
  }
  auto add = [&t](const char* name, uint64_t v) { t.rows.push_back({name, num(v)}); };
  add("databases", databases.size());
  add("users", cfg.users.size());
  add("pools", pools);
  add("used_clients", used);
  add("active_clients", active);
  add("waiting_clients", waiting);
  add("held_clients", held);
  add("login_clients", login);
  add("console_clients", consoles);
  add("used_servers", servers - idle);
  add("idle_servers", idle);
  add("close_needed_servers", close_needed);
  add("mcp_sessions", mcp);
  return t;
}

AdminConsole::Table AdminConsole::showSockets() const {
  Table t{
      {"type", "id", "user", "database", "state", "addr", "recv_pending", "send_pending", "worker"},
      {}};
  for (const auto& l : view()) {
    for (const auto& c : l.clients) {
      // SHOW CLIENTS' cells: id, user, database, state, addr.
      t.rows.push_back({"C", c.cells[0], c.cells[1], c.cells[2], c.cells[3], c.cells[4],
                        num(c.input_bytes), num(c.output_bytes), std::to_string(l.worker)});
    }
    for (const auto& s : l.servers) {
      // SHOW SERVERS' cells: id, pool (role/database), database, state.
      const std::string role = s[1].substr(0, s[1].find('/'));
      t.rows.push_back(
          {"S", s[0], role, s[2], s[3], kNull, kNull, kNull, std::to_string(l.worker)});
    }
  }
  return t;
}

AdminConsole::Table AdminConsole::showSessions() const {
  Table t{{"id", "user", "group", "database", "client_name", "client_version", "protocol_version",
           "addr", "idle_seconds", "calls_in_flight", "initialized"},
          {}};
  for (const auto& l : view()) {
    for (const auto& s : l.mcp_sessions) t.rows.push_back(s.cells);
  }
  return t;
}

AdminConsole::Table AdminConsole::showDatabaseStats(StatsView v) const {
  const std::vector<std::string> totals = {"total_query_count",  "total_error_count",
                                           "total_denied_count", "total_rows",
                                           "total_sent",         "total_query_time"};
  const std::vector<std::string> averages = {"avg_query_count", "avg_rows", "avg_sent",
                                             "avg_query_time"};
  Table t{{"database"}, {}};
  if (v != StatsView::kAverages) t.columns.insert(t.columns.end(), totals.begin(), totals.end());
  if (v != StatsView::kTotals) t.columns.insert(t.columns.end(), averages.begin(), averages.end());
  std::map<std::string, DatabaseStats, std::less<>> all;
  uint64_t uptime_ms = 1;
  for (const auto& l : view()) {
    for (const auto& [db, s] : l.databases) all[db].add(s);
    uptime_ms = std::max(uptime_ms, l.uptime_ms);
  }
  const double seconds = std::max(1.0, static_cast<double>(uptime_ms) / 1000.0);
  for (const auto& [db, s] : all) {
    std::vector<std::string> row{db};
    if (v != StatsView::kAverages) {
      for (uint64_t x : {s.queries, s.errors, s.denied, s.rows, s.bytes_sent, s.query_time_us}) {
        row.push_back(num(x));
      }
    }
    if (v != StatsView::kTotals) {
      // Per second since start for counts and bytes; per statement for the time, in µs.
      const auto per_second = [seconds](uint64_t x) {
        return num(static_cast<uint64_t>(static_cast<double>(x) / seconds));
      };
      row.push_back(per_second(s.queries));
      row.push_back(per_second(s.rows));
      row.push_back(per_second(s.bytes_sent));
      row.push_back(num(s.queries ? s.query_time_us / s.queries : 0));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace pgwarden::daemon
