// The admin console's rows of one loop, and the round of posts that collects every loop's.
#include "daemon/console_rows.h"

#include <algorithm>

#include "daemon/daemon.h"
#include "daemon/worker.h"
#include "pool/server_state.h"
#include "session/client_session.h"

namespace pgwarden::daemon {

namespace {

const char* clientState(const ClientSession& s) {
  switch (s.state()) {
    case ClientState::kStartup: return "startup";
    case ClientState::kAuth: return "auth";
    case ClientState::kAcquiring: return "acquiring";
    case ClientState::kAttaching: return "attaching";
    case ClientState::kReady: return s.busy() ? "active" : "idle";
    case ClientState::kClosing: return "closing";
    case ClientState::kClosed: return "closed";
  }
  return "closed";
}

}  // namespace

LoopRows collectRows(Worker& w, const std::string& null) {
  LoopRows out;
  out.worker = w.index();
  const uint64_t now = w.nowMs();
  const std::string worker = std::to_string(w.index());
  w.forEachSession([&](const ClientSession& s) {
    ClientRow r;
    r.id = s.id();
    r.user = s.user();
    r.conversation_id = s.conversationId();
    r.agent_id = s.agentId();
    r.closing = s.state() == ClientState::kClosing || s.state() == ClientState::kClosed;
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
  w.pools().forEachPool([&](const Pool& p) {
    p.forEachConnection([&](const PooledConnection& c) {
      const bool idle = c.state() == ServerState::kIdle;
      out.servers.push_back({std::to_string(c.id()), p.role() + "/" + p.database(), p.database(),
                             stateName(c.state()),
                             c.backendPid() ? std::to_string(c.backendPid()) : null,
                             idle && now > c.idleSinceMs()
                                 ? std::to_string((now - c.idleSinceMs()) / 1000)
                                 : null,
                             c.lastError().empty() ? null : c.lastError(),
                             c.holder() ? std::to_string(c.holder()) : null,
                             std::to_string(c.assignments()), worker});
    });
  });
  out.pools = w.pools().stats();
  out.counters = w.countersNow();
  return out;
}

struct ConsoleGather::State {
  Worker* home = nullptr;
  Done done;
  Result result;
  size_t waiting = 0;
};

std::shared_ptr<ConsoleGather> ConsoleGather::start(Daemon& daemon, Worker& home,
                                                    const std::string& null, bool reload, Done done) {
  auto g = std::make_shared<ConsoleGather>();
  g->state_ = std::make_shared<State>();
  g->state_->home = &home;
  g->state_->done = std::move(done);
  std::weak_ptr<State> weak = g->state_;
  // Every answer comes back to the console's loop; the last one runs `done` there.
  const auto arrive = [weak](std::function<void(Result&)> add) {
    auto st = weak.lock();
    if (!st) return;
    add(st->result);
    if (--st->waiting == 0) {
      Done d = std::move(st->done);
      d(std::move(st->result));
    }
  };
  std::vector<Worker*> others;
  for (const auto& w : daemon.workers()) {
    if (w.get() != &home) others.push_back(w.get());
  }
  g->state_->waiting = others.size() + (reload ? 1 : 0);
  Worker* back = &home;
  if (g->state_->waiting == 0) {
    ++g->state_->waiting;
    (void)back->post([arrive] { arrive([](Result&) {}); });
  }
  for (Worker* w : others) {
    const bool posted = w->post([w, back, null, arrive] {
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
  return g;
}

}  // namespace pgwarden::daemon
