// What the admin console shows of one loop: its client sessions and server connections as rows,
// its pools and its counters. Collected on that loop's own thread (collectRows), so a console on
// any loop reads every loop without touching what another thread owns: with several loops the
// console asks each for its rows (ConsoleGather) before it answers a command that lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "metrics/counters.h"
#include "pool/pool.h"

namespace pgwarden::daemon {

class Daemon;
class Worker;

// What one loop's statements on one database added up to since start (SHOW STATS): the
// history records of its SQL clients, its console and the MCP endpoint.
struct DatabaseStats {
  uint64_t queries = 0;
  uint64_t errors = 0;  // failed in the server, cancelled, aborted
  uint64_t denied = 0;  // refused by a guard or a budget
  uint64_t rows = 0;
  uint64_t bytes_sent = 0;
  uint64_t query_time_us = 0;
  void add(const DatabaseStats& o) {
    queries += o.queries;
    errors += o.errors;
    denied += o.denied;
    rows += o.rows;
    bytes_sent += o.bytes_sent;
    query_time_us += o.query_time_us;
  }
};
// A loop keeps at most this many databases apart; statements on any other count under
// kOtherDatabases (client-chosen names must not grow the map without end).
inline constexpr size_t kMaxDatabaseStats = 256;
inline constexpr const char* kOtherDatabases = "(other)";

// An MCP session as SHOW SESSIONS lists it (read on loop 0, which runs the endpoint).
struct McpSessionRow {
  std::vector<std::string> cells;
};

struct ClientRow {
  uint64_t id = 0;
  std::string user;
  std::string database;
  bool console = false;  // an admin console session
  bool busy = false;     // a statement running (the server owes answers)
  bool in_transaction = false;
  bool held = false;  // a message held by PAUSE or SUSPEND
  size_t input_bytes = 0;
  size_t output_bytes = 0;
  std::string conversation_id;
  std::string agent_id;
  bool closing = false;
  std::vector<std::string> cells;  // SHOW CLIENTS' columns
};

struct LoopRows {
  int worker = 0;
  std::vector<ClientRow> clients;
  std::vector<std::vector<std::string>> servers;  // SHOW SERVERS' columns
  std::vector<pool::PoolStats> pools;
  metrics::Counters counters;
  std::map<std::string, DatabaseStats, std::less<>> databases;
  std::vector<McpSessionRow> mcp_sessions;  // loop 0 only
  uint64_t uptime_ms = 0;
};

// On `w`'s loop. `null` is the cell text the console writes as NULL.
LoopRows collectRows(Worker& w, const std::string& null);

// One round of asking every loop but `home` for its rows (and, when `reload`, loop 0 to reload
// the configuration): `done` runs on `home`'s loop once all have answered, with the rows and
// whether the reload succeeded. Dropped when the returned handle is released first (the console
// went away).
class ConsoleGather {
 public:
  struct Result {
    std::vector<LoopRows> loops;
    bool reloaded = false;
  };
  using Done = std::function<void(Result)>;
  // Set: rounds repeat (one per janitor tick of `home`) until it holds for every loop's rows,
  // `home`'s included (PAUSE waits for running statements this way).
  using Until = std::function<bool(const std::vector<LoopRows>&)>;
  static std::shared_ptr<ConsoleGather> start(Daemon& daemon, Worker& home, const std::string& null,
                                              bool reload, Done done, Until until = nullptr);
  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace pgwarden::daemon
