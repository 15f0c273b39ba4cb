// Names of record outcomes as stored in the `outcome` column and printed by reports, and the
// text form of a record's spool id.
#include "history/record.h"

#include <charconv>
#include <cstdio>

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

std::string recordUid(const Record& r) {
  if (r.spool_seq == 0) return {};
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%016llx-%llu",
                              static_cast<unsigned long long>(r.spool_epoch),
                              static_cast<unsigned long long>(r.spool_seq));
  return std::string(buf, static_cast<size_t>(n));
}

bool parseRecordUid(std::string_view uid, uint64_t* epoch, uint64_t* seq) {
  if (uid.size() < 18 || uid[16] != '-') return false;
  const char* end = uid.data() + uid.size();
  auto e = std::from_chars(uid.data(), uid.data() + 16, *epoch, 16);
  if (e.ec != std::errc() || e.ptr != uid.data() + 16) return false;
  auto s = std::from_chars(uid.data() + 17, end, *seq);
  return s.ec == std::errc() && s.ptr == end && *seq != 0;
}

}  // namespace pgwarden::history
