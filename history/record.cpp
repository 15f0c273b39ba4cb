// Names of record outcomes as stored in the `outcome` column and printed by reports.
#include "history/record.h"

namespace pgwarden::history {

const char* outcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk: return "ok";
    case Outcome::kError: return "error";
    case Outcome::kDenied: return "denied";
    case Outcome::kCancelled: return "cancelled";
    case Outcome::kClientGone: return "client_gone";
    case Outcome::kBudget: return "budget";
    case Outcome::kAborted: return "aborted";
  }
  return "unknown";
}

bool parseOutcome(const std::string& name, Outcome* out) {
  for (Outcome o : {Outcome::kOk, Outcome::kError, Outcome::kDenied, Outcome::kCancelled,
                    Outcome::kClientGone, Outcome::kBudget, Outcome::kAborted}) {
    if (name == outcomeName(o)) {
      *out = o;
      return true;
    }
  }
  return false;
}

}  // namespace pgwarden::history
