// Stopping without dropping clients: the connections still queued on the listeners are served
// rather than reset, and SHUTDOWN WAIT_FOR_CLIENTS lets the clients connected now go on until they
// leave (docs/operations.md, "Restarting without dropping clients"). Also the console's way of
// running a task on every loop.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "daemon/catalog_stats.h"
#include "daemon/daemon.h"
#include "daemon/systemd_notify.h"
#include "mcp/mcp_server.h"

namespace pgwarden::daemon {

void Daemon::drainListeners() {
  // A connection the kernel queued on our listener would be reset when it closes: each is taken
  // and served here like any other (the others on the port get the ones that come later).
  size_t n = 0;
  for (auto& l : listeners_) {
    n += l->drainPending([this](int fd) {
      Worker& to = threaded() ? leastLoaded() : primary();
      to.assigned();
      if (to.index() == 0) {
        to.adopt(fd, false);
      } else if (!to.post([&to, fd] { to.adopt(fd, false); })) {
        ::close(fd);
      }
    });
  }
  if (n > 0)
    spdlog::info("shutting down: took {} connection{} still queued on the listeners", n,
                 n == 1 ? "" : "s");
}

void Daemon::requestShutdownWaitForClients() {
  if (shutting_down_) return;
  shutting_down_ = true;
  shutdown_deadline_ms_ = UINT64_MAX;
  if (notifier_) (void)notifier_->stopping();
  const size_t n = sessionCount();
  spdlog::info(
      "shutting down (WAIT_FOR_CLIENTS): no new connections; waiting for {} session{} "
      "to disconnect",
      n, n == 1 ? "" : "s");
  drainListeners();
  for (auto& l : listeners_) l->close();
  if (mcp_) mcp_->beginDrain();
  catalog_->stop();
  for (size_t i = 1; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    (void)w->post([w] { w->beginShutdown(UINT64_MAX, true); });
  }
  primary().beginShutdown(UINT64_MAX, true);
  tick();
}

void Daemon::onEveryLoop(const std::function<void(Worker&)>& fn) {
  for (const auto& w : workers_) {
    Worker* worker = w.get();
    (void)worker->post([worker, fn] { fn(*worker); });
  }
}

}  // namespace pgwarden::daemon
