// Internal to the client session: helpers shared by more than one of its source files
// (client_session_*.cpp). Not part of any interface.
#pragma once

#include <memory>

#include "session/statement_recorder.h"

namespace pgwarden::daemon::session_detail {

// A portal replaced by a new Bind or closed ends its run here only when no Execute of that run
// still waits for the server (a suspended portal). In a pipeline (Bind, Execute, Bind, Execute,
// ..., Sync) the server's answer to the Execute finishes the run, with its rows or its error.
template <typename PendingQueue>
bool awaitingServer(const PendingQueue& pending, const std::shared_ptr<StatementRun>& run) {
  for (const auto& p : pending) {
    if (p.run == run) return true;
  }
  return false;
}

}  // namespace pgwarden::daemon::session_detail
