// The admin console's rows of one loop, and the round of posts that collects every loop's.
#include "daemon/console_rows.h"

#include <algorithm>
#include <utility>

#include "daemon/daemon.h"
#include "daemon/worker.h"
#include "mcp/mcp_server.h"
#include "pool/server_state.h"
#include "session/client_session.h"

namespace pgwarden::daemon {

namespace {

const char* clientState(const session::ClientSession& s) {
  switch (s.state()) {
    case session::ClientState::kStartup:
      return "startup";
    case session::ClientState::kAuth:
      return "auth";
    case session::ClientState::kAcquiring:
      return "acquiring";
    case session::ClientState::kAttaching:
      return "attaching";
    case session::ClientState::kReady:
      return s.busy() ? "active" : "idle";
    case session::ClientState::kClosing:
      return "closing";
    case session::ClientState::kClosed:
      return "closed";
  }
  return "closed";
}

}  // namespace

LoopRows collectRows(Worker& w, const std::string& null) {
  LoopRows out;
  out.worker = w.index();
  const uint64_t now = w.nowMs();
  const std::string worker = std::to_string(w.index());
  w.forEachSession([&](const session::ClientSession& s) {
    ClientRow r;
    r.id = s.id();
    r.user = s.user();
    r.conversation_id = s.conversationId();
    r.agent_id = s.agentId();
    r.closing =
        s.state() == session::ClientState::kClosing || s.state() == session::ClientState::kClosed;
    r.database = s.database();
    r.console = s.isConsole();
    r.busy = s.busy();
    r.in_transaction = s.inTransaction();
    r.held = s.heldByConsole();
    r.input_bytes = s.clientInputBytes();
    r.output_bytes = s.clientOutputBytes();
    const uint64_t since = s.connectedAtMs();
    r.cells = {std::to_string(s.id()), s.user(), s.database(), clientState(s), s.peer(),
               s.applicationName(), s.group().empty() ? null : s.group(),
               s.agentId().empty() ? null : s.agentId(),
               s.conversationId().empty() ? null : s.conversationId(),
               std::to_string(since > 0 && now > since ? (now - since) / 1000 : 0),
               std::to_string(s.statementsRun()), s.poolModeName(),
               s.serverId() ? std::to_string(s.serverId()) : null, worker};
    out.clients.push_back(std::move(r));
  });
  w.pools().forEachPool([&](const pool::Pool& p) {
    p.forEachConnection([&](const pool::PooledConnection& c) {
      const bool idle = c.state() == pool::ServerState::kIdle;
      out.servers.push_back(
          {std::to_string(c.id()), p.role() + "/" + p.database(), p.database(),
           pool::stateName(c.state()), c.backendPid() ? std::to_string(c.backendPid()) : null,
           idle && now > c.idleSinceMs() ? std::to_string((now - c.idleSinceMs()) / 1000) : null,
           c.lastError().empty() ? null : c.lastError(),
           c.holder() ? std::to_string(c.holder()) : null, std::to_string(c.assignments()), worker,
           p.settings()->upstream.host + ":" + std::to_string(p.settings()->upstream.port)});
    });
  });
  out.pools = w.pools().stats();
  out.counters = w.countersNow();
  out.databases = w.databaseStats();
  out.uptime_ms = w.uptimeMs();
  if (const auto* mcp = w.mcpServer()) {
    for (auto& v : mcp->sessionViews()) {
      out.mcp_sessions.push_back(
          {{std::to_string(v.history_id), v.user, v.group, v.database, v.client_name,
            v.client_version, v.protocol_version, v.peer_host, std::to_string(v.idle_ms / 1000),
            std::to_string(v.in_flight), v.initialized ? "yes" : "no"}});
    }
  }
  return out;
}

struct ConsoleGather::State {
  Daemon* daemon = nullptr;
  Worker* home = nullptr;
  std::string null;
  bool reload = false;
  Done done;
  Until until;
  Result result;
  size_t waiting = 0;
};

namespace {

// One round: every loop but home posts its rows back to home (and loop 0 reloads when asked);
// the last answer ends the round there, and either runs `done` or, while `until` does not hold,
// starts the next round on home's next janitor tick.
void round(const std::shared_ptr<ConsoleGather::State>& st) {
  using Result = ConsoleGather::Result;
  std::weak_ptr<ConsoleGather::State> weak = st;
  const auto arrive = [weak](std::function<void(Result&)> add) {
    auto s = weak.lock();
    if (!s) return;
    add(s->result);
    if (--s->waiting > 0) return;
    if (s->until) {
      std::vector<LoopRows> all = s->result.loops;
      all.push_back(collectRows(*s->home, s->null));
      if (!s->until(all)) {
        s->result = Result{};
        s->home->runAtNextTick([weak] {
          if (auto again = weak.lock()) round(again);
        });
        return;
      }
    }
    ConsoleGather::Done d = std::move(s->done);
    d(std::move(s->result));
  };
  Daemon& daemon = *st->daemon;
  std::vector<Worker*> others;
  for (const auto& w : daemon.workers()) {
    if (w.get() != st->home) others.push_back(w.get());
  }
  const bool reload = std::exchange(st->reload, false);  // once, in the first round
  st->waiting = others.size() + (reload ? 1 : 0);
  Worker* back = st->home;
  if (st->waiting == 0) {
    ++st->waiting;
    (void)back->post([arrive] { arrive([](Result&) {}); });
  }
  for (Worker* w : others) {
    const bool posted = w->post([w, back, null = st->null, arrive] {
      LoopRows rows = collectRows(*w, null);
      (void)back->post([arrive, rows = std::move(rows)]() mutable {
        arrive([&rows](Result& r) { r.loops.push_back(std::move(rows)); });
      });
    });
    // A loop that has finished (shutdown) has no rows to give.
    if (!posted) (void)back->post([arrive] { arrive([](Result&) {}); });
  }
  if (reload) {
    const bool posted = daemon.postToLoop0([&daemon, back, arrive] {
      const bool ok = daemon.reload();
      (void)back->post([arrive, ok] { arrive([ok](Result& r) { r.reloaded = ok; }); });
    });
    if (!posted) (void)back->post([arrive] { arrive([](Result&) {}); });
  }
}

}  // namespace

std::shared_ptr<ConsoleGather> ConsoleGather::start(Daemon& daemon, Worker& home,
                                                    const std::string& null, bool reload, Done done,
                                                    Until until) {
  auto g = std::make_shared<ConsoleGather>();
  g->state_ = std::make_shared<State>();
  g->state_->daemon = &daemon;
  g->state_->home = &home;
  g->state_->null = null;
  g->state_->reload = reload;
  g->state_->done = std::move(done);
  g->state_->until = std::move(until);
  round(g->state_);
  return g;
}

}  // namespace pgwarden::daemon
