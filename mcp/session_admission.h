// Who may start an MCP session, and what the endpoint remembers of sessions that ended. Each
// principal (a bearer token, or the loopback-trusted caller) has its own cap besides the global
// one: a caller at its cap makes room among its own sessions; at the global cap only the
// principal holding the most sessions gives one up; a session running a call or holding a write
// transaction is never ended to make room. A request naming a session that ended hears why.
// Pure, no I/O: McpServer applies the decisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mcp/jsonrpc.h"

namespace pgwarden::mcp {

// How a session ended, for the log, the client's stream and a later request naming it.
enum class SessionEnd : uint8_t {
  kDeleted,           // the client's DELETE
  kIdle,              // mcp.session_idle_timeout
  kEvictedOwnCap,     // room for a newer session of the same principal
  kEvictedGlobalCap,  // room for another principal's session; this principal held the most
};
// A stable word for the reason ("deleted", "idle", "evicted") and a sentence for a reader.
const char* sessionEndCode(SessionEnd why);
std::string sessionEndText(SessionEnd why);

// What a session looks like to the admission decision.
struct SessionSlot {
  std::string_view id;
  std::string_view principal;
  uint64_t last_used_ms = 0;
  bool evictable = false;  // no call in flight, no write transaction open
};

struct Admission {
  enum class Kind : uint8_t { kAdmit, kEvict, kRefuseOwnCap, kRefuseGlobalCap };
  Kind kind = Kind::kAdmit;
  std::string victim;  // kEvict: the session to end first
  SessionEnd why = SessionEnd::kEvictedOwnCap;
};

// Whether a new session of `principal` may start among `sessions`, and what makes room for it.
Admission admitSession(std::string_view principal, const std::vector<SessionSlot>& sessions,
                       size_t max_total, size_t max_per_principal);

// The sessions that ended lately (at most `capacity`, the oldest forgotten first), so a request
// naming one is told what happened instead of a bare "not found".
class EndedSessions {
 public:
  struct Ended {
    std::string user;  // only its own user hears the reason
    SessionEnd why = SessionEnd::kDeleted;
    bool rolled_back = false;  // a write transaction was open (or already rolled back, untold)
  };
  explicit EndedSessions(size_t capacity = 1024) : capacity_(capacity) {}
  void remember(const std::string& id, Ended ended);
  const Ended* find(const std::string& id) const;
  size_t size() const { return by_id_.size(); }

 private:
  size_t capacity_;
  std::deque<std::string> order_;
  std::unordered_map<std::string, Ended> by_id_;
};

// The JSON-RPC error (code -32001, sent with HTTP 404) for a request naming session `id` that
// `user` may not use: why it ended when it is remembered and was `user`'s, and in every case that
// the client must initialize a new session.
Json sessionNotFound(const EndedSessions& ended, const std::string& id, const std::string& user);

}  // namespace pgwarden::mcp
