// The admin console: a session on the virtual database "pgwarden" opened by a user listed in
// admin_users. It answers SHOW/RELOAD/KILL commands over the simple query protocol with proper
// RowDescription/DataRow results, so plain psql renders them as tables. It never reaches a server.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "daemon/console_rows.h"
#include "protocol/messages.h"
#include "session/session_host.h"

namespace pgwarden::daemon {

class Daemon;
class Worker;

// The cell text the console writes as NULL.
inline const std::string kNull = "\x01NULL";

// The console's words: a command trimmed, split on whitespace as typed, or upper-cased.
std::string_view trim(std::string_view s);
std::vector<std::string> rawWords(std::string_view s);
std::vector<std::string> words(std::string_view s);

// Runs on its session's loop (`home`). With several loops, a text that lists sessions, servers,
// pools or counters, or reloads, first gathers every loop's rows (gather()), then is answered.
class AdminConsole final : public session::ConsoleSession {
 public:
  AdminConsole(Daemon& daemon, Worker& home, uint64_t session_id, std::string user);
  // Who is on the console, for the history records of its commands.
  void setClient(std::string client_addr, std::string application_name) {
    client_addr_ = std::move(client_addr);
    application_name_ = std::move(application_name);
  }

  void welcome(std::string& out) override;
  [[nodiscard]] bool onMessage(const protocol::Frame& f, std::string& out) override;
  [[nodiscard]] bool gather(const protocol::Frame& f, std::function<void()> ready) override;

  // Runs one Query text (one or more commands separated by ';'), without the ReadyForQuery.
  void execute(std::string_view text, std::string& out);

 private:
  struct Table {
    std::vector<std::string> columns;
    std::vector<std::vector<std::string>> rows;  // "\x01NULL" marks a NULL cell (kNull)
  };
  void runCommand(std::string_view command, std::string& out);
  // One history record per command (statement kind and intent "admin"), like any statement.
  void record(std::string_view command, int64_t started_us, std::string_view answer) const;
  static void writeTable(const Table& t, std::string& out);
  static void writeError(std::string& out, std::string_view sqlstate, std::string_view message,
                         std::string_view hint = {});

  // Control commands (console_commands.cpp). `raw` are the words as typed (database names keep
  // their case). True: `w` named one and `out` has its answer.
  bool control(const std::vector<std::string>& w, const std::vector<std::string>& raw,
               std::string& out);
  // From gather(): a text that is one waiting command (PAUSE, SUSPEND, WAIT_CLOSE) acts now and
  // answers once what it waits for holds (`ready` then); true while it waits.
  bool startWait(std::string_view text, const std::function<void()>& ready);
  // Only SHOW (and SHOW HELP) for a user of stats_users.
  bool readOnly() const;

  Table showClients() const;
  // PgBouncer's names (console_show.cpp).
  Table showDatabases() const;
  Table showUsers() const;
  Table showMem() const;
  Table showState() const;
  Table showLists() const;
  Table showSockets() const;
  Table showSessions() const;
  Table showHosts() const;
  Table showStats() const { return showDatabaseStats(StatsView::kAll); }
  Table showStatsTotals() const { return showDatabaseStats(StatsView::kTotals); }
  Table showStatsAverages() const { return showDatabaseStats(StatsView::kAverages); }
  enum class StatsView { kAll, kTotals, kAverages };
  Table showDatabaseStats(StatsView v) const;
  Table showServers() const;
  Table showPools() const;
  Table showTotals() const;
  Table showGroups() const;
  Table showGuards() const;
  Table showConversations() const;
  Table showConfig() const;
  Table showVersion() const;
  Table showHelp() const;
  void reload(std::string& out);
  void killClient(std::string_view arg, std::string& out);

  // Every loop's rows: gathered for this text, or this loop's alone.
  std::vector<LoopRows> view() const;

  Daemon& daemon_;
  Worker& home_;
  std::shared_ptr<ConsoleGather> gathering_;
  std::optional<ConsoleGather::Result> gathered_;  // for the text being answered
  uint64_t session_id_;
  std::string user_;
  std::string client_addr_;
  std::string application_name_;
  bool skipping_ = false;  // an extended-protocol message was refused: ignore until Sync
  // A waiting command's answer, made when it acted (gather()) and written when the text runs.
  std::optional<std::string> waited_answer_;
  int64_t waited_since_us_ = 0;
};

}  // namespace pgwarden::daemon
