// The admin console's process-wide holds (daemon/console_control.h).
#include "daemon/console_control.h"

namespace pgwarden::daemon {

session::ConsoleHolds ConsoleControl::holds(const std::string& database) const {
  if (!any_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(mu_);
  session::ConsoleHolds h;
  h.suspended = suspended_;
  h.paused = all_paused_ || paused_.count(database) > 0;
  h.disabled = disabled_.count(database) > 0;
  return h;
}

void ConsoleControl::update() {
  any_.store(all_paused_ || suspended_ || !paused_.empty() || !disabled_.empty(),
             std::memory_order_release);
}

bool ConsoleControl::pause(const std::string& database) {
  std::lock_guard lock(mu_);
  if (all_paused_) return false;
  if (database.empty()) {
    all_paused_ = true;
    paused_.clear();
  } else if (!paused_.insert(database).second) {
    return false;
  }
  update();
  return true;
}

bool ConsoleControl::resume(const std::string& database) {
  std::lock_guard lock(mu_);
  bool changed = false;
  if (database.empty()) {
    changed = all_paused_ || suspended_ || !paused_.empty();
    all_paused_ = suspended_ = false;
    paused_.clear();
  } else {
    changed = paused_.erase(database) > 0;
  }
  update();
  return changed;
}

bool ConsoleControl::suspend() {
  std::lock_guard lock(mu_);
  if (suspended_) return false;
  suspended_ = true;
  update();
  return true;
}

bool ConsoleControl::disable(const std::string& database) {
  std::lock_guard lock(mu_);
  const bool changed = disabled_.insert(database).second;
  update();
  return changed;
}

bool ConsoleControl::enable(const std::string& database) {
  std::lock_guard lock(mu_);
  const bool changed = disabled_.erase(database) > 0;
  update();
  return changed;
}

ConsoleControl::State ConsoleControl::state() const {
  std::lock_guard lock(mu_);
  State s;
  s.all_paused = all_paused_;
  s.suspended = suspended_;
  s.paused.assign(paused_.begin(), paused_.end());
  s.disabled.assign(disabled_.begin(), disabled_.end());
  return s;
}

}  // namespace pgwarden::daemon
