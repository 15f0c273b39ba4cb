#include "session/statement_execution.h"

namespace pgwarden::daemon {

bool StatsWait::over(uint64_t now_ms, bool loaded) {
  if (until_ms_ == 0) return false;
  if (!loaded && now_ms < until_ms_) return false;
  until_ms_ = 0;
  return true;
}

}  // namespace pgwarden::daemon
