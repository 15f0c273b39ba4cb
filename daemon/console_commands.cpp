// The admin console's control commands, PgBouncer's names and meanings where they apply: PAUSE,
// RESUME, SUSPEND, RECONNECT, WAIT_CLOSE, DISABLE, ENABLE, KILL db, SHUTDOWN. What they set for
// the process is in ConsoleControl; what they do to a loop's sessions and pools runs on that
// loop (Worker's part below). A command that waits (PAUSE, SUSPEND, WAIT_CLOSE) acts when its
// text arrives and answers once every loop's rows show what it waits for, never blocking a loop.
#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "daemon/admin_console.h"
#include "daemon/daemon.h"
#include "daemon/worker.h"
#include "history/record.h"
#include "session/client_session.h"

namespace pgwarden::daemon {

// Worker: on its own loop.

session::ConsoleHolds Worker::consoleHolds(const std::string& database) const {
  return daemon_.control().holds(database);
}

void Worker::consoleResumed() {
  std::vector<session::ClientSession*> held;
  for (auto& [id, s] : sessions_) {
    if (s->heldByConsole()) held.push_back(s.get());
  }
  for (session::ClientSession* s : held) s->consoleResumed();
}

void Worker::killDatabase(const std::string& database) {
  std::vector<session::ClientSession*> victims;
  for (auto& [id, s] : sessions_) {
    if (!s->isConsole() && s->database() == database) victims.push_back(s.get());
  }
  for (session::ClientSession* s : victims) {
    s->terminate("57P01", "terminating connection due to administrator command");
  }
  reconnect(database);
}

void Worker::reconnect(const std::string& database) {
  if (database.empty()) {
    pools_.reconnect("");
    return;
  }
  if (const auto server_db = config_->upstream.mapDatabase(database)) pools_.reconnect(*server_db);
}

const mcp::McpServer* Worker::mcpServer() const {
  return index_ == 0 ? daemon_.mcpServer() : nullptr;
}

void Worker::countDatabase(const history::RecordView& r) {
  auto it = database_stats_.find(r.database);
  if (it == database_stats_.end()) {
    const std::string key =
        database_stats_.size() < kMaxDatabaseStats ? std::string(r.database) : kOtherDatabases;
    it = database_stats_.try_emplace(key).first;
  }
  DatabaseStats& d = it->second;
  ++d.queries;
  switch (r.outcome) {
    case Outcome::kOk:
      break;
    case Outcome::kDenied:
    case Outcome::kBudget:
      ++d.denied;
      break;
    case Outcome::kError:
    case Outcome::kCancelled:
    case Outcome::kClientGone:
    case Outcome::kAborted:
      ++d.errors;
      break;
  }
  d.rows += static_cast<uint64_t>(std::max<int64_t>(0, r.rows_returned));
  d.bytes_sent += static_cast<uint64_t>(std::max<int64_t>(0, r.bytes_sent));
  d.query_time_us += static_cast<uint64_t>(std::max<int64_t>(0, r.duration_us));
}

// The console.

namespace {

std::string commandComplete(std::string_view tag) {
  std::string out;
  protocol::writeCommandComplete(out, tag);
  return out;
}

std::string errorAnswer(std::string_view sqlstate, std::string_view message,
                        std::string_view hint = {}) {
  std::string out;
  protocol::writeError(out, "ERROR", sqlstate, message, {}, hint);
  return out;
}

// Whether a session's database is the one a command names (empty: every database).
bool names(const std::string& database, const ClientRow& c) {
  return !c.console && (database.empty() || c.database == database);
}

}  // namespace

bool AdminConsole::readOnly() const {
  const auto& cfg = *home_.config();
  return !cfg.isAdmin(user_) && cfg.isStatsUser(user_);
}

bool AdminConsole::startWait(std::string_view text, const std::function<void()>& ready) {
  // One command alone (a trailing ';' allowed): a waiting command mixed with others is
  // answered as an error by control().
  std::string_view command = trim(text);
  while (!command.empty() && command.back() == ';')
    command = trim(command.substr(0, command.size() - 1));
  if (command.find(';') != std::string_view::npos || readOnly()) return false;
  const auto w = words(command);
  const auto raw = rawWords(command);
  if (w.empty() || w.size() > 2 || (w[0] != "PAUSE" && w[0] != "SUSPEND" && w[0] != "WAIT_CLOSE")) {
    return false;
  }
  if (w[0] == "SUSPEND" && w.size() != 1) return false;
  const std::string db = w.size() == 2 ? raw[1] : std::string();
  waited_since_us_ = history::wallClockMicros();
  ConsoleGather::Until until;
  if (w[0] == "PAUSE") {
    if (!daemon_.control().pause(db)) {
      waited_answer_ = errorAnswer(
          "55000", db.empty() ? "already paused" : "database \"" + db + "\" is already paused",
          "RESUME ends the pause.");
      return false;
    }
    spdlog::info("s{} user={}: admin paused {}", session_id_, logsafe(user_),
                 logsafe(db.empty() ? std::string("every database") : db));
    waited_answer_ = commandComplete("PAUSE");
    // Running statements and open transactions finish; new statements are held. The MCP
    // endpoint's statements run on mcp.database.
    const bool mcp_too = db.empty() || db == home_.config()->mcp.database;
    until = [db, mcp_too, &daemon = daemon_](const std::vector<LoopRows>& loops) {
      if (mcp_too && daemon.mcpRunning() > 0) return false;
      for (const auto& l : loops) {
        for (const auto& c : l.clients) {
          if (names(db, c) && !c.closing && (c.busy || c.in_transaction)) return false;
        }
      }
      return true;
    };
  } else if (w[0] == "SUSPEND") {
    if (!daemon_.control().suspend()) {
      waited_answer_ = errorAnswer("55000", "already suspended", "RESUME ends the suspension.");
      return false;
    }
    spdlog::info("s{} user={}: admin suspended every session", session_id_, logsafe(user_));
    waited_answer_ = commandComplete("SUSPEND");
    // Every statement running now has its answer out to its client.
    until = [](const std::vector<LoopRows>& loops) {
      for (const auto& l : loops) {
        for (const auto& c : l.clients) {
          if (!c.console && !c.closing && (c.busy || c.output_bytes > 0)) return false;
        }
      }
      return true;
    };
  } else {
    std::string server_db;
    if (!db.empty()) {
      const auto mapped = home_.config()->upstream.mapDatabase(db);
      server_db = mapped ? *mapped : db;
    }
    waited_answer_ = commandComplete("WAIT_CLOSE");
    until = [server_db](const std::vector<LoopRows>& loops) {
      for (const auto& l : loops) {
        for (const auto& p : l.pools) {
          if ((server_db.empty() || p.database == server_db) && p.close_needed > 0) return false;
        }
      }
      return true;
    };
  }
  gathering_ = ConsoleGather::start(
      daemon_, home_, kNull, false,
      [this, ready](ConsoleGather::Result r) {
        gathering_.reset();
        gathered_ = std::move(r);
        ready();
      },
      std::move(until));
  return true;
}

bool AdminConsole::control(const std::vector<std::string>& w, const std::vector<std::string>& raw,
                           std::string& out) {
  if (w.empty()) return false;
  const std::string& verb = w[0];
  const std::string db = raw.size() == 2 ? raw[1] : std::string();
  auto done = [&out](std::string_view tag) { protocol::writeCommandComplete(out, tag); };
  if ((verb == "PAUSE" || verb == "WAIT_CLOSE") && w.size() <= 2) {
    // Here only when sent with other commands: gather() runs it alone.
    writeError(out, "0A000", verb + " waits: send it as a text of its own");
    return true;
  }
  if (verb == "SUSPEND" && w.size() == 1) {
    writeError(out, "0A000", "SUSPEND waits: send it as a text of its own");
    return true;
  }
  if (verb == "RESUME" && w.size() <= 2) {
    if (!daemon_.control().resume(db)) {
      writeError(
          out, "55000",
          db.empty() ? "nothing is paused or suspended" : "database \"" + db + "\" is not paused",
          "SHOW STATE lists what is paused.");
      return true;
    }
    spdlog::info("s{} user={}: admin resumed {}", session_id_, logsafe(user_),
                 logsafe(db.empty() ? std::string("every database") : db));
    daemon_.onEveryLoop([](Worker& wk) { wk.consoleResumed(); });
    done("RESUME");
    return true;
  }
  if (verb == "RECONNECT" && w.size() <= 2) {
    spdlog::info("s{} user={}: admin reconnect {}", session_id_, logsafe(user_),
                 logsafe(db.empty() ? std::string("every database") : db));
    daemon_.onEveryLoop([db](Worker& wk) { wk.reconnect(db); });
    done("RECONNECT");
    return true;
  }
  if ((verb == "DISABLE" || verb == "ENABLE") && w.size() == 2) {
    const bool changed =
        verb == "DISABLE" ? daemon_.control().disable(db) : daemon_.control().enable(db);
    if (!changed) {
      writeError(out, "55000",
                 "database \"" + db + "\" is " + (verb == "DISABLE" ? "disabled" : "enabled") +
                     " already");
      return true;
    }
    spdlog::info("s{} user={}: admin {} database {}", session_id_, logsafe(user_),
                 verb == "DISABLE" ? "disabled" : "enabled", logsafe(db));
    done(verb);
    return true;
  }
  if (verb == "KILL" && w.size() == 2) {
    if (db == kDatabase) {
      writeError(out, "22023", "the console's own database cannot be killed");
      return true;
    }
    // As PgBouncer: the database's clients and servers go, and its new clients wait for RESUME.
    (void)daemon_.control().pause(db);
    spdlog::info("s{} user={}: admin killed database {}", session_id_, logsafe(user_), logsafe(db));
    daemon_.onEveryLoop([db](Worker& wk) { wk.killDatabase(db); });
    done("KILL");
    return true;
  }
  if (verb == "REFRESH" && w.size() == 2 && w[1] == "CATALOG") {
    // The catalog snapshot (tables, views, columns, statistics) read again now, as on SIGHUP.
    spdlog::info("s{} user={}: admin refreshed the catalog snapshot", session_id_, logsafe(user_));
    Daemon& d = daemon_;
    (void)d.postToLoop0([&d] { d.refreshCatalog(); });
    done("REFRESH");
    return true;
  }
  if (verb == "SHUTDOWN" && (w.size() == 1 || (w.size() == 2 && w[1] == "WAIT_FOR_CLIENTS"))) {
    const bool wait = w.size() == 2;
    spdlog::info("s{} user={}: admin SHUTDOWN{}", session_id_, logsafe(user_),
                 wait ? " WAIT_FOR_CLIENTS" : "");
    Daemon& d = daemon_;
    (void)d.postToLoop0([&d, wait] {
      if (wait)
        d.requestShutdownWaitForClients();
      else
        d.requestShutdown(true);
    });
    done("SHUTDOWN");
    return true;
  }
  return false;
}

}  // namespace pgwarden::daemon
