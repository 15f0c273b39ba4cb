// Names for counter labels and the SQLSTATE class index.
#include "metrics/counters.h"

namespace pgwarden::daemon {

namespace {

int base36(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return -1;
}

char fromBase36(int v) { return static_cast<char>(v < 10 ? '0' + v : 'A' + v - 10); }

}  // namespace

const char* rejectReasonName(RejectReason r) {
  switch (r) {
    case RejectReason::kMaxConnections: return "max_connections";
    case RejectReason::kAuthFailure: return "auth_failure";
    case RejectReason::kStartupTimeout: return "startup_timeout";
    case RejectReason::kBadProtocol: return "bad_protocol";
    case RejectReason::kNotAllowed: return "not_allowed";
    case RejectReason::kUnreachable: return "unreachable";
    case RejectReason::kAcquireTimeout: return "acquire_timeout";
    case RejectReason::kShutdown: return "shutdown";
    case RejectReason::kStartupLimit: return "startup_limit";
  }
  return "?";
}

const char* connectFailureName(ConnectFailure f) {
  switch (f) {
    case ConnectFailure::kTooManyConnections: return "too_many_connections";
    case ConnectFailure::kAuthFailed: return "auth_failed";
    case ConnectFailure::kRefused: return "refused";
    case ConnectFailure::kTimeout: return "timeout";
    case ConnectFailure::kOther: return "other";
  }
  return "?";
}

int sqlstateClass(const char* sqlstate, size_t len) {
  if (len < 2) return -1;
  const int a = base36(sqlstate[0]);
  const int b = base36(sqlstate[1]);
  if (a < 0 || b < 0) return -1;
  return a * 36 + b;
}

void sqlstateClassName(int index, char out[3]) {
  out[0] = fromBase36(index / 36);
  out[1] = fromBase36(index % 36);
  out[2] = 0;
}

}  // namespace pgwarden::daemon
