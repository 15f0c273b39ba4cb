#include "mcp/session_admission.h"

#include <map>

namespace pgwarden::mcp {

namespace {

constexpr int kSessionNotFound = -32001;

// The least recently used session of `principal` that may be ended; nullptr when none.
const SessionSlot* oldestEvictable(const std::vector<SessionSlot>& sessions,
                                   std::string_view principal) {
  const SessionSlot* oldest = nullptr;
  for (const auto& s : sessions) {
    if (s.principal == principal && s.evictable &&
        (!oldest || s.last_used_ms < oldest->last_used_ms))
      oldest = &s;
  }
  return oldest;
}

}  // namespace

const char* sessionEndCode(SessionEnd why) {
  switch (why) {
    case SessionEnd::kDeleted:
      return "deleted";
    case SessionEnd::kIdle:
      return "idle";
    case SessionEnd::kEvictedOwnCap:
    case SessionEnd::kEvictedGlobalCap:
      return "evicted";
  }
  return "ended";
}

std::string sessionEndText(SessionEnd why) {
  switch (why) {
    case SessionEnd::kDeleted:
      return "deleted by the client";
    case SessionEnd::kIdle:
      return "idle longer than mcp.session_idle_timeout";
    case SessionEnd::kEvictedOwnCap:
      return "evicted to make room for a newer session of the same caller "
             "(mcp.max_sessions_per_principal); "
             "it was the caller's session idle the longest";
    case SessionEnd::kEvictedGlobalCap:
      return "evicted to make room for another caller's session (mcp.max_sessions); its caller "
             "held the "
             "most sessions and this one was idle the longest";
  }
  return "ended";
}

Admission admitSession(std::string_view principal, const std::vector<SessionSlot>& sessions,
                       size_t max_total, size_t max_per_principal) {
  std::map<std::string_view, size_t> held;
  for (const auto& s : sessions) ++held[s.principal];
  const size_t own = held.count(principal) ? held[principal] : 0;
  Admission a;
  if (own >= max_per_principal) {
    const SessionSlot* v = oldestEvictable(sessions, principal);
    if (!v) return Admission{Admission::Kind::kRefuseOwnCap, {}, SessionEnd::kEvictedOwnCap};
    return Admission{Admission::Kind::kEvict, std::string(v->id), SessionEnd::kEvictedOwnCap};
  }
  if (sessions.size() < max_total) return a;
  // The global cap: the principals holding the most sessions give one up, the newcomer's own
  // first when it is one of them; a principal holding fewer than the newcomer never does.
  size_t most = 0;
  for (const auto& [p, n] : held) most = std::max(most, n);
  const SessionSlot* victim = nullptr;
  SessionEnd why = SessionEnd::kEvictedGlobalCap;
  if (own == most) {
    victim = oldestEvictable(sessions, principal);
    why = SessionEnd::kEvictedOwnCap;
  }
  for (const auto& [p, n] : held) {
    if (victim || n != most || p == principal) continue;
    const SessionSlot* v = oldestEvictable(sessions, p);
    if (v) victim = v;
  }
  if (!victim) return Admission{Admission::Kind::kRefuseGlobalCap, {}, why};
  return Admission{Admission::Kind::kEvict, std::string(victim->id), why};
}

void EndedSessions::remember(const std::string& id, Ended ended) {
  if (capacity_ == 0) return;
  if (by_id_.count(id) == 0) {
    if (order_.size() >= capacity_) {
      by_id_.erase(order_.front());
      order_.pop_front();
    }
    order_.push_back(id);
  }
  by_id_[id] = std::move(ended);
}

const EndedSessions::Ended* EndedSessions::find(const std::string& id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

Json sessionNotFound(const EndedSessions& ended, const std::string& id, const std::string& user) {
  static constexpr const char* kAgain =
      "send initialize without an Mcp-Session-Id header to start a new session, then repeat the "
      "request";
  const EndedSessions::Ended* e = id.empty() ? nullptr : ended.find(id);
  if (!e || e->user != user) {
    return rpcError(
        nullptr, kSessionNotFound,
        std::string("Session not found: no session of yours has this Mcp-Session-Id (it ended "
                    "long ago, or never existed); ") +
            kAgain,
        Json{{"code", "SESSION_NOT_FOUND"}, {"next_step", "initialize"}});
  }
  std::string message = "Session not found: this session ended (" + sessionEndText(e->why) + ")";
  if (e->rolled_back) {
    message +=
        "; its write transaction was rolled back (TRANSACTION_ROLLED_BACK), nothing of it was "
        "committed";
  }
  message += "; ";
  message += kAgain;
  return rpcError(nullptr, kSessionNotFound, message,
                  Json{{"code", e->rolled_back ? "TRANSACTION_ROLLED_BACK" : "SESSION_ENDED"},
                       {"reason", sessionEndCode(e->why)},
                       {"transaction_rolled_back", e->rolled_back},
                       {"next_step", "initialize"}});
}

}  // namespace pgwarden::mcp
