// Internal to the client session: helpers shared by more than one of its source files
// (client_session_*.cpp). Not part of any interface.
#pragma once

#include <memory>

#include "session/statement_recorder.h"

namespace pgwarden::session::session_detail {

// A portal replaced by a new Bind or closed ends its run here only when no Execute of that run
// still waits for the server (a suspended portal). In a pipeline (Bind, Execute, Bind, Execute,
// ..., Sync) the server's answer to the Execute finishes the run, with its rows or its error.
// Constant time: the queue's entries count themselves in the run (QueuedRun).
inline bool awaitingServer(const std::shared_ptr<StatementRun>& run) { return run && run->queued > 0; }

}  // namespace pgwarden::session::session_detail
