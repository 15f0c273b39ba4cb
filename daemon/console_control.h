// What the admin console's control commands set for the whole process (PAUSE, SUSPEND, DISABLE,
// KILL): read by every loop's sessions at each message, so it is shared behind a lock, with an
// atomic flag that keeps the common case (nothing held) to one relaxed load.
#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "session/session_host.h"

namespace pgwarden::daemon {

class ConsoleControl {
 public:
  // Any thread. `database` is a client-side database name.
  session::ConsoleHolds holds(const std::string& database) const;
  // PAUSE (empty: every database). False: it was paused already.
  bool pause(const std::string& database);
  // RESUME: every pause and the suspension (empty), or one database's pause. False: nothing to
  // resume.
  bool resume(const std::string& database);
  bool suspend();  // false: suspended already
  // DISABLE / ENABLE. False: no change.
  bool disable(const std::string& database);
  bool enable(const std::string& database);

  struct State {
    bool all_paused = false;
    bool suspended = false;
    std::vector<std::string> paused;
    std::vector<std::string> disabled;
  };
  State state() const;

 private:
  void update();  // under mu_

  mutable std::mutex mu_;
  std::atomic<bool> any_{false};
  bool all_paused_ = false;
  bool suspended_ = false;
  std::set<std::string, std::less<>> paused_;
  std::set<std::string, std::less<>> disabled_;
};

}  // namespace pgwarden::daemon
