#include "common/outcome.h"

namespace pgwarden {

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
  for (size_t i = 0; i < kOutcomeCount; ++i) {
    const auto o = static_cast<Outcome>(i);
    if (name == outcomeName(o)) {
      *out = o;
      return true;
    }
  }
  return false;
}

}  // namespace pgwarden
