// What the admin console shows of one loop: its client sessions and server connections as rows,
// its pools and its counters. Collected on that loop's own thread (collectRows), so a console on
// any loop reads every loop without touching what another thread owns: with several loops the
// console asks each for its rows (ConsoleGather) before it answers a command that lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metrics/counters.h"
#include "pool/pool.h"

namespace pgwarden::daemon {

class Daemon;
class Worker;

struct ClientRow {
  uint64_t id = 0;
  std::string user;
  std::string conversation_id;
  std::string agent_id;
  bool closing = false;
  std::vector<std::string> cells;  // SHOW CLIENTS' columns
};

struct LoopRows {
  int worker = 0;
  std::vector<ClientRow> clients;
  std::vector<std::vector<std::string>> servers;  // SHOW SERVERS' columns
  std::vector<PoolStats> pools;
  Counters counters;
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
  static std::shared_ptr<ConsoleGather> start(Daemon& daemon, Worker& home, const std::string& null,
                                              bool reload, Done done);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace pgwarden::daemon
