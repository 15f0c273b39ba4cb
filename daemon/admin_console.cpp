// Admin console commands: each SHOW builds a small table from loop state (sessions, pools,
// counters, config, the budget ledger) and writes it as RowDescription + DataRow + CommandComplete.
// Runs on the loop thread; every command is O(sessions + connections + conversations shown).
#include "daemon/admin_console.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <optional>

#include "common/log_text.h"
#include "session/client_session.h"
#include "metrics/counters.h"
#include "daemon/daemon.h"
#include "daemon/daemon_metrics.h"
#include "daemon/worker.h"
#include "history/record.h"
#include "budgets/budget.h"
#include "pgwarden_version.h"

namespace pgwarden::daemon {

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits on runs of whitespace, as typed (database names are case-sensitive).
std::vector<std::string> rawWords(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// The same upper-cased; the console's grammar is a few keywords.
std::vector<std::string> words(std::string_view s) {
  auto out = rawWords(s);
  for (auto& w : out) w = upper(w);
  return out;
}

namespace {

using history::wallClockMicros;

// SHOW CONVERSATIONS lists at most this many (the ledger can hold far more).
constexpr size_t kMaxConversationsShown = 1000;

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

// Whether a console text names a command that reads other loops (or reloads).
struct TextNeeds {
  bool rows = false;
  bool reload = false;
};

TextNeeds needsOf(std::string_view text) {
  TextNeeds n;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string_view::npos) end = text.size();
    const auto w = words(text.substr(start, end - start));
    if (w.size() == 1 && w[0] == "RELOAD") n.reload = true;
    if (w.size() >= 2 && w[0] == "KILL") n.rows = true;
    static const std::vector<std::string> kLists = {
        "CLIENTS",       "SERVERS",   "POOLS", "STATS",        "TOTALS",
        "CONVERSATIONS", "DATABASES", "USERS", "MEM",          "LISTS",
        "SOCKETS",       "SESSIONS",  "STATE", "STATS_TOTALS", "STATS_AVERAGES"};
    if (w.size() == 2 && w[0] == "SHOW" &&
        std::find(kLists.begin(), kLists.end(), w[1]) != kLists.end()) {
      n.rows = true;
    }
    start = end + 1;
  }
  return n;
}

}  // namespace

AdminConsole::AdminConsole(Daemon& daemon, Worker& home, uint64_t session_id, std::string user)
    : daemon_(daemon), home_(home), session_id_(session_id), user_(std::move(user)) {}

bool AdminConsole::gather(const protocol::Frame& f, std::function<void()> ready) {
  if (gathered_ || waited_answer_ || f.type != protocol::fe::kQuery) return false;
  std::string_view text = f.body;
  if (!text.empty() && text.back() == '\0') text.remove_suffix(1);
  if (startWait(text, ready)) return true;
  if (waited_answer_ || daemon_.workers().size() < 2) return false;
  const TextNeeds needs = needsOf(text);
  // RELOAD runs where it runs anyway (loop 0) when the console is there.
  const bool reload = needs.reload && home_.index() != 0;
  if (!needs.rows && !reload) return false;
  gathering_ = ConsoleGather::start(daemon_, home_, kNull, reload,
                                    [this, ready = std::move(ready)](ConsoleGather::Result r) {
                                      gathering_.reset();
                                      gathered_ = std::move(r);
                                      ready();
                                    });
  return true;
}

std::vector<LoopRows> AdminConsole::view() const {
  std::vector<LoopRows> out;
  out.push_back(collectRows(home_, kNull));
  if (gathered_) out.insert(out.end(), gathered_->loops.begin(), gathered_->loops.end());
  return out;
}

void AdminConsole::welcome(std::string& out) {
  // psql reads server_version to pick its own behaviour; the rest is what every driver expects.
  protocol::writeParameterStatus(out, "server_version", "15.0");
  protocol::writeParameterStatus(out, "server_encoding", "UTF8");
  protocol::writeParameterStatus(out, "client_encoding", "UTF8");
  protocol::writeParameterStatus(out, "DateStyle", "ISO, MDY");
  protocol::writeParameterStatus(out, "integer_datetimes", "on");
  protocol::writeParameterStatus(out, "standard_conforming_strings", "on");
  protocol::writeParameterStatus(out, "application_name", "pgwarden");
  protocol::writeReadyForQuery(out, 'I');
}

bool AdminConsole::onMessage(const protocol::Frame& f, std::string& out) {
  switch (f.type) {
    case protocol::fe::kQuery: {
      std::string_view text = f.body;
      if (!text.empty() && text.back() == '\0') text.remove_suffix(1);
      execute(text, out);
      gathered_.reset();
      waited_answer_.reset();
      protocol::writeReadyForQuery(out, 'I');
      return true;
    }
    case protocol::fe::kTerminate:
      return false;
    case protocol::fe::kSync:
      skipping_ = false;
      protocol::writeReadyForQuery(out, 'I');
      return true;
    case protocol::fe::kFlush:
      return true;
    default:
      // Parse/Bind/Describe/Execute/Close and anything else: one error, then silence until Sync,
      // as PostgreSQL does after an error in an extended-protocol exchange.
      if (!skipping_) {
        skipping_ = true;
        writeError(out, "0A000", "the pgwarden admin console accepts simple queries only",
                   "Use psql, or a driver's simple query mode.");
      }
      return true;
  }
}

void AdminConsole::execute(std::string_view text, std::string& out) {
  bool any = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view command = trim(text.substr(start, end - start));
    if (!command.empty()) {
      any = true;
      const size_t before = out.size();
      // A waiting command's time runs from when it acted, before the wait.
      const int64_t started = waited_answer_ ? waited_since_us_ : wallClockMicros();
      runCommand(command, out);
      record(command, started, std::string_view(out).substr(before));
      // An error ends the text, as in PostgreSQL's simple protocol.
      if (out.size() > before && out[before] == 'E') return;
    }
    start = end + 1;
  }
  if (!any) protocol::writeEmptyQueryResponse(out);
}

void AdminConsole::record(std::string_view command, int64_t started_us, std::string_view answer) const {
  history::Record r;
  r.started_at_us = started_us;
  r.finished_at_us = wallClockMicros();
  r.duration_us = r.finished_at_us - r.started_at_us;
  r.instance_id = home_.config()->instance_id;
  r.session_id = session_id_;
  r.user = user_;
  r.database = std::string(kDatabase);
  r.client_addr = client_addr_;
  r.application_name = application_name_;
  r.query_intent_inferred = "admin";
  r.statement_kind = "admin";
  r.sql_text = std::string(command);
  r.guard_actions = "[]";
  r.protocol = "simple";
  r.outcome = history::Outcome::kOk;
  // The answer is ours: an ErrorResponse first means the command failed; DataRows are its rows.
  if (answer.size() > 5 && answer[0] == 'E') {
    r.outcome = history::Outcome::kError;
    const size_t len = std::min<size_t>(protocol::readU32(answer.data() + 1), answer.size() - 1);
    if (auto e = protocol::parseErrorFields(answer.substr(5, len >= 4 ? len - 4 : 0))) {
      r.sqlstate = std::string(e->sqlstate());
      r.error_message = std::string(e->message());
    }
  } else {
    size_t pos = 0;
    while (pos + 5 <= answer.size()) {
      if (answer[pos] == 'D') ++r.rows_returned;
      pos += 1 + protocol::readU32(answer.data() + pos + 1);
    }
    r.bytes_sent = static_cast<int64_t>(answer.size());
  }
  // The same sink as every other statement: counters, metrics and history.
  history::RecordView view = history::viewOf(r);
  home_.onStatement(view, nullptr);
}

void AdminConsole::runCommand(std::string_view command, std::string& out) {
  const auto w = words(command);
  spdlog::info(
      "s{} user={} db=pgwarden: admin command: {}", session_id_, logsafe(user_),
      logsafe(w.empty() ? std::string() : w[0] + (w.size() > 1 ? " " + w[1] : std::string())));
  if (waited_answer_) {
    out += *waited_answer_;
    return;
  }
  if (w.size() == 2 && w[0] == "SHOW") {
    using Show = Table (AdminConsole::*)() const;
    static const std::pair<std::string_view, Show> kShows[] = {
        {"CLIENTS", &AdminConsole::showClients},
        {"SERVERS", &AdminConsole::showServers},
        {"POOLS", &AdminConsole::showPools},
        {"DATABASES", &AdminConsole::showDatabases},
        {"USERS", &AdminConsole::showUsers},
        {"STATS", &AdminConsole::showStats},
        {"STATS_TOTALS", &AdminConsole::showStatsTotals},
        {"STATS_AVERAGES", &AdminConsole::showStatsAverages},
        {"TOTALS", &AdminConsole::showTotals},
        {"MEM", &AdminConsole::showMem},
        {"STATE", &AdminConsole::showState},
        {"LISTS", &AdminConsole::showLists},
        {"SOCKETS", &AdminConsole::showSockets},
        {"SESSIONS", &AdminConsole::showSessions},
        {"HOSTS", &AdminConsole::showHosts},
        {"GROUPS", &AdminConsole::showGroups},
        {"GUARDS", &AdminConsole::showGuards},
        {"CONVERSATIONS", &AdminConsole::showConversations},
        {"CONFIG", &AdminConsole::showConfig},
        {"VERSION", &AdminConsole::showVersion},
        {"HELP", &AdminConsole::showHelp}};
    std::optional<Table> t;
    for (const auto& [name, show] : kShows) {
      if (w[1] == name) t = (this->*show)();
    }
    if (t) {
      writeTable(*t, out);
      return;
    }
  } else if (!w.empty() && readOnly()) {
    writeError(out, "42501", "user \"" + user_ + "\" may only SHOW (stats_users)",
               "Users of admin_users may run the other commands.");
    return;
  } else if (w.size() == 1 && w[0] == "RELOAD") {
    reload(out);
    return;
  } else if (w.size() == 3 && w[0] == "KILL" && w[1] == "CLIENT") {
    // The id as typed (digits), not upper-cased text.
    const auto raw = trim(command);
    killClient(trim(raw.substr(raw.find_last_of(" \t\r\n") + 1)), out);
    return;
  } else if (control(w, rawWords(command), out)) {
    return;
  }
  writeError(
      out, "42601", "unknown admin console command",
      "SHOW HELP lists the commands: SHOW CLIENTS|SERVERS|POOLS|DATABASES|USERS|STATS|"
      "STATS_TOTALS|STATS_AVERAGES|TOTALS|MEM|STATE|LISTS|SOCKETS|SESSIONS|HOSTS|GROUPS|GUARDS|"
      "CONVERSATIONS|CONFIG|VERSION|HELP, RELOAD, REFRESH CATALOG, KILL CLIENT <id>, PAUSE [db], "
      "RESUME [db], SUSPEND, RECONNECT [db], WAIT_CLOSE [db], DISABLE db, ENABLE db, "
      "KILL db, SHUTDOWN [WAIT_FOR_CLIENTS].");
}

void AdminConsole::writeTable(const Table& t, std::string& out) {
  std::vector<protocol::ColumnDesc> cols;
  cols.reserve(t.columns.size());
  for (const auto& c : t.columns) cols.push_back(protocol::ColumnDesc{c});
  protocol::writeRowDescription(out, cols);
  std::vector<std::optional<std::string_view>> values;
  for (const auto& row : t.rows) {
    values.clear();
    for (const auto& v : row) {
      if (v == kNull) values.emplace_back(std::nullopt);
      else values.emplace_back(std::string_view(v));
    }
    protocol::writeDataRow(out, values);
  }
  protocol::writeCommandComplete(out, "SHOW");
}

void AdminConsole::writeError(std::string& out, std::string_view sqlstate,
                              std::string_view message, std::string_view hint) {
  protocol::writeError(out, "ERROR", sqlstate, message, {}, hint);
}

AdminConsole::Table AdminConsole::showClients() const {
  Table t{{"id", "user", "database", "state", "addr", "application_name", "group", "agent_id",
           "conversation_id", "connected_seconds", "statements", "pool_mode", "server_id", "worker"},
          {}};
  std::vector<const ClientRow*> all;
  const auto loops = view();
  for (const auto& l : loops) {
    for (const auto& c : l.clients) all.push_back(&c);
  }
  std::sort(all.begin(), all.end(), [](auto* a, auto* b) { return a->id < b->id; });
  for (const ClientRow* c : all) t.rows.push_back(c->cells);
  return t;
}

AdminConsole::Table AdminConsole::showServers() const {
  Table t{{"id", "pool", "database", "state", "backend_pid", "idle_seconds", "last_error",
           "client_id", "assignments", "worker", "host"},
          {}};
  for (const auto& l : view()) {
    for (const auto& row : l.servers) t.rows.push_back(row);
  }
  return t;
}

AdminConsole::Table AdminConsole::showPools() const {
  Table t{{"pool", "role", "database", "total", "connecting", "idle", "active", "resetting",
           "waiting", "default_mode", "host"},
          {}};
  const char* mode =
      home_.config()->pool.mode == pool::PoolMode::kTransaction ? "transaction" : "session";
  std::vector<pool::PoolStats> all;
  for (const auto& l : view()) all.insert(all.end(), l.pools.begin(), l.pools.end());
  for (const pool::PoolStats& p : mergePoolStats(all)) {
    t.rows.push_back({p.role + "/" + p.database, p.role, p.database, std::to_string(p.total),
                      std::to_string(p.connecting), std::to_string(p.idle),
                      std::to_string(p.active), std::to_string(p.resetting),
                      std::to_string(p.waiting), mode, p.host});
  }
  return t;
}

AdminConsole::Table AdminConsole::showTotals() const {
  Table t{{"name", "value"}, {}};
  metrics::Counters c;
  size_t clients = 0;
  for (const auto& l : view()) {
    c += l.counters;
    clients += l.clients.size();
  }
  auto add = [&t](std::string name, uint64_t v) {
    t.rows.push_back({std::move(name), std::to_string(v)});
  };
  add("clients_accepted", c.clients_accepted);
  for (size_t i = 0; i < metrics::kRejectReasons; ++i) {
    add(std::string("clients_rejected_") + metrics::rejectReasonName(static_cast<metrics::RejectReason>(i)),
        c.clients_rejected[i]);
  }
  add("clients_current", clients);
  add("auth_failures", c.auth_failures);
  add("server_connects", c.server_connects);
  add("server_connect_errors", c.server_connect_errors);
  for (size_t i = 0; i < metrics::kConnectFailures; ++i) {
    add(std::string("server_connect_errors_") + metrics::connectFailureName(static_cast<metrics::ConnectFailure>(i)),
        c.server_connect_errors_by_reason[i]);
  }
  add("server_lost", c.server_lost);
  add("pool_assignments", c.pool_assignments);
  add("pool_reuse", c.pool_reuse);
  add("cancel_requests_received", c.cancel_requests_received);
  add("cancel_requests_forwarded", c.cancel_requests_forwarded);
  uint64_t total = 0;
  for (size_t i = 0; i < kOutcomeCount; ++i) {
    add(std::string("statements_") + outcomeName(static_cast<Outcome>(i)),
        c.statements[i]);
    total += c.statements[i];
  }
  add("statements_total", total);
  add("rows_returned", c.rows_returned);
  add("statements_truncated", c.statements_truncated);
  add("warnings_sent", c.warnings_sent);
  add("rewrites", c.rewrites);
  add("plan_cache_hits", c.plan_cache_hits);
  add("plan_cache_misses", c.plan_cache_misses);
  add("plan_shape_hits", c.plan_shape_hits);
  add("protocol_errors", c.protocol_errors);
  add("clients_stalled", c.clients_stalled);
  add("stats_refreshes", c.stats_refreshes);
  add("stats_refresh_errors", c.stats_refresh_errors);
  add("history_submitted", c.history_submitted);
  add("history_dropped", c.history_dropped);
  if (auto* ledger = daemon_.budgets()) {
    add("conversations_live", ledger->size());
    add("conversation_evictions", ledger->evictions());
    add("budget_store_failures", ledger->storeFailures());
  }
  return t;
}

AdminConsole::Table AdminConsole::showGroups() const {
  Table t{{"group", "guards", "users", "search_path"}, {}};
  const auto& cfg = *home_.config();
  for (const auto& [name, g] : cfg.groups) {
    std::string users;
    for (const auto& u : cfg.users) {
      if (u.group != name) continue;
      if (!users.empty()) users += ",";
      users += u.name;
    }
    std::string path;
    for (const auto& s : g->searchPath()) path += (path.empty() ? "" : ",") + s;
    t.rows.push_back({name, std::to_string(g->guards().size()), users, path});
  }
  return t;
}

AdminConsole::Table AdminConsole::showGuards() const {
  Table t{{"group", "position", "kind", "codes"}, {}};
  for (const auto& [name, g] : home_.config()->groups) {
    size_t pos = 0;
    for (const auto& guard : g->guards()) {
      std::string codes;
      for (auto c : guard->codes()) {
        if (!codes.empty()) codes += ",";
        codes += c;
      }
      t.rows.push_back({name, std::to_string(++pos), std::string(guard->kind()), codes});
    }
  }
  return t;
}

AdminConsole::Table AdminConsole::showConversations() const {
  Table t{{"user", "conversation_id", "agent_id", "statements", "denials", "budget_left",
           "last_seen_seconds"},
          {}};
  const auto& cfg = *home_.config();
  // The agent_id a live session of the conversation last declared.
  const auto loops = view();
  std::vector<const ClientRow*> sessions;
  for (const auto& l : loops) {
    for (const auto& c : l.clients) sessions.push_back(&c);
  }
  std::sort(sessions.begin(), sessions.end(), [](auto* a, auto* b) { return a->id < b->id; });
  auto agentFor = [&sessions](const std::string& user, const std::string& conversation) {
    std::string agent = kNull;
    for (const ClientRow* s : sessions) {
      if (s->user == user && s->conversation_id == conversation && !s->agent_id.empty()) {
        agent = s->agent_id;
      }
    }
    return agent;
  };
  const auto nowSteady = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  std::vector<std::string> seen;
  if (auto* ledger = daemon_.budgets()) {
    for (const auto& c : ledger->conversations(kMaxConversationsShown)) {
      std::string left = kNull;
      if (const auto* u = cfg.findUser(c.user)) {
        if (const auto* g = cfg.findGroup(u->group)) {
          if (const auto* bg = budgets::findBudgetGuard(*g)) {
            if (bg->limits().max_statements > 0) {
              left = std::to_string(
                  std::max<int64_t>(0, bg->limits().max_statements - c.counters.statements));
            }
          }
        }
      }
      seen.push_back(c.user + '\0' + c.conversation);
      t.rows.push_back({c.user, c.conversation, agentFor(c.user, c.conversation),
                        std::to_string(c.counters.statements), std::to_string(c.counters.denied),
                        left,
                        std::to_string(std::max<int64_t>(0, nowSteady - c.last_seen_ms) / 1000)});
    }
  }
  // Conversations of live sessions that no budget tracks: what the sessions themselves know.
  for (const ClientRow* s : sessions) {
    if (s->conversation_id.empty() || t.rows.size() >= kMaxConversationsShown) continue;
    const std::string key = s->user + '\0' + s->conversation_id;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    // SHOW CLIENTS' statements column.
    t.rows.push_back({s->user, s->conversation_id, s->agent_id.empty() ? kNull : s->agent_id,
                      s->cells[10], kNull, kNull, "0"});
  }
  return t;
}

AdminConsole::Table AdminConsole::showConfig() const {
  Table t{{"key", "value"}, {}};
  const auto& c = *home_.config();
  auto add = [&t](std::string k, std::string v) { t.rows.push_back({std::move(k), std::move(v)}); };
  add("path", c.path);
  add("instance_id", c.instance_id);
  std::string listen;
  for (const auto& a : c.listen.addresses) {
    listen += (listen.empty() ? "" : ",") + a.host + ":" + std::to_string(a.port);
  }
  add("listen.addresses", listen);
  add("listen.unix_socket_dir", c.listen.unix_socket_dir);
  add("listen.so_reuseport", c.listen.so_reuseport ? "true" : "false");
  // The upstream password is a secret and never shown.
  add("upstream.host", c.upstream.host);
  add("upstream.port", std::to_string(c.upstream.port));
  add("upstream.user", c.upstream.user);
  add("upstream.connect_timeout", ms(c.upstream.connect_timeout));
  add("upstream.statement_timeout", ms(c.upstream.statement_timeout));
  add("upstream.lock_timeout", ms(c.upstream.lock_timeout));
  add("pool.min_size", std::to_string(c.pool.min_size));
  add("pool.max_size", std::to_string(c.pool.max_size));
  add("pool.acquire_timeout", ms(c.pool.acquire_timeout));
  add("pool.idle_timeout", ms(c.pool.idle_timeout));
  add("limits.max_client_connections", std::to_string(c.limits.max_client_connections));
  add("limits.max_message_bytes", std::to_string(c.limits.max_message_bytes));
  add("limits.startup_timeout", ms(c.limits.startup_timeout));
  add("limits.client_idle_timeout", ms(c.limits.client_idle_timeout));
  add("limits.client_stall_timeout", ms(c.limits.client_stall_timeout));
  add("limits.shutdown_timeout", ms(c.limits.shutdown_timeout));
  add("auth.failed_attempts_per_minute", std::to_string(c.auth.failed_attempts_per_minute));
  add("auth.failed_attempts_per_address", std::to_string(c.auth.failed_attempts_per_address));
  std::string admins;
  for (const auto& a : c.admin_users) admins += (admins.empty() ? "" : ",") + a;
  add("admin_users", admins);
  std::string stats;
  for (const auto& a : c.stats_users) stats += (stats.empty() ? "" : ",") + a;
  add("stats_users", stats);
  add("logging.level", c.logging.level);
  add("logging.format", c.logging.format);
  add("metrics.listen", c.metrics.listen);
  add("history.store", c.history.store);
  add("history.queue_size", std::to_string(c.history.queue_size));
  std::string groups;
  for (const auto& [name, g] : c.groups) groups += (groups.empty() ? "" : ",") + name;
  add("groups", groups);
  add("users", std::to_string(c.users.size()));
  return t;
}

AdminConsole::Table AdminConsole::showVersion() const {
  return Table{{"version"}, {{std::string("pgwarden ") + kVersion + " (git " + kGitSha + ")"}}};
}

AdminConsole::Table AdminConsole::showHelp() const {
  return Table{{"command", "description"},
               {{"SHOW CLIENTS", "client connections: id, user, state, peer, agent context"},
                {"SHOW SERVERS", "server connections by pool, state and backend pid"},
                {"SHOW POOLS", "server connection pools and their counts by state"},
                {"SHOW DATABASES", "databases in use: pool, connections, paused, disabled"},
                {"SHOW USERS", "users: group, console role, sessions"},
                {"SHOW STATS", "per database since start: statements, rows, bytes, time, averages"},
                {"SHOW STATS_TOTALS", "SHOW STATS' totals"},
                {"SHOW STATS_AVERAGES", "SHOW STATS' averages"},
                {"SHOW TOTALS", "totals since start: connections, statements, errors, history"},
                {"SHOW MEM", "what the process holds: sessions, buffers, queues, resident memory"},
                {"SHOW STATE", "paused, suspended, disabled, shutting down"},
                {"SHOW LISTS", "how many of each: databases, users, pools, clients, servers"},
                {"SHOW SOCKETS", "each client and server socket and its buffered bytes"},
                {"SHOW SESSIONS", "the MCP endpoint's sessions"},
                {"SHOW HOSTS", "the upstream hosts: primary and replicas, in rotation, lag"},
                {"SHOW GROUPS", "policy groups, their guard count and users"},
                {"SHOW GUARDS", "each group's guard chain in order, with the codes each can give"},
                {"SHOW CONVERSATIONS", "conversations: statements, denials, budget left"},
                {"SHOW CONFIG", "the running configuration (secrets left out)"},
                {"SHOW VERSION", "pgwarden's version and build"},
                {"SHOW HELP", "this list"},
                {"RELOAD", "re-read the config file; new sessions use it"},
                {"REFRESH CATALOG", "read the catalog snapshot again now (tables, views, columns)"},
                {"KILL CLIENT <id>", "end a client connection (ids from SHOW CLIENTS)"},
                {"PAUSE [db]", "hold new statements; answers once running ones finished"},
                {"RESUME [db]", "end PAUSE, SUSPEND or KILL db: held statements go on"},
                {"SUSPEND", "hold every client message; answers once none is running"},
                {"RECONNECT [db]", "close server connections as their clients let go"},
                {"WAIT_CLOSE [db]", "answers once RECONNECT's connections have closed"},
                {"DISABLE db", "refuse new logins to db"},
                {"ENABLE db", "accept new logins to db again"},
                {"KILL db",
                 "end db's clients and server connections; its statements wait "
                 "for RESUME"},
                {"SHUTDOWN", "stop pgwarden (as SIGINT)"},
                {"SHUTDOWN WAIT_FOR_CLIENTS", "stop accepting; exit once every client left"}}};
}

void AdminConsole::reload(std::string& out) {
  // On loop 0 the reload runs here; elsewhere gather() had loop 0 run it before this text.
  const bool ok = home_.index() == 0 ? daemon_.reload() : gathered_ && gathered_->reloaded;
  if (!ok) {
    writeError(out, "F0000", "reload failed: the running configuration is kept",
               "The pgwarden log names the file, line and key that were rejected.");
    return;
  }
  protocol::writeCommandComplete(out, "RELOAD");
}

void AdminConsole::killClient(std::string_view arg, std::string& out) {
  uint64_t id = 0;
  const auto [p, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), id);
  if (ec != std::errc() || p != arg.data() + arg.size()) {
    writeError(out, "22023", "KILL CLIENT takes a client id", "SHOW CLIENTS lists the ids.");
    return;
  }
  if (id == session_id_) {
    writeError(out, "22023", "this is your own session", "Disconnect instead.");
    return;
  }
  const ClientRow* s = nullptr;
  const auto loops = view();
  for (const auto& l : loops) {
    for (const auto& c : l.clients) {
      if (c.id == id) s = &c;
    }
  }
  if (!s || s->closing) {
    writeError(out, "42704", "no client with id " + std::to_string(id),
               "SHOW CLIENTS lists the ids.");
    return;
  }
  spdlog::info("s{} user={}: admin killed client s{}", session_id_, logsafe(user_), id);
  // On the loop that owns it.
  daemon_.withSession(id, [](session::ClientSession& victim) {
    victim.terminate("57P01", "terminating connection due to administrator command");
  });
  protocol::writeCommandComplete(out, "KILL");
}

}  // namespace pgwarden::daemon
