// How a statement ended: the one outcome type history records, the counters count and the
// metrics label, whichever front end the statement came through.
#pragma once

#include <cstddef>
#include <string>

namespace pgwarden {

enum class Outcome {
  kOk,          // allowed and completed
  kError,       // allowed, failed on the server (sqlstate set)
  kDenied,      // denied by a guard (deny_code set); never reached the server
  kCancelled,   // cancelled by the client (CancelRequest) or statement_timeout
  kClientGone,  // the client disconnected mid-statement
  kBudget,      // denied because a budget was exhausted
  // pgwarden ended the session before the statement finished (shutdown, the server connection
  // lost, a protocol error, an administrator's KILL CLIENT); error_message says why
  kAborted,
};
inline constexpr size_t kOutcomeCount = 7;

// "ok", "error", "denied", "cancelled", "client_gone", "budget", "aborted"
const char* outcomeName(Outcome o);
// The inverse of outcomeName; false when `name` is not one of them.
bool parseOutcome(const std::string& name, Outcome* out);

}  // namespace pgwarden
