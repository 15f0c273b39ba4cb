// What the admin console reads of the MCP endpoint's sessions (SHOW SESSIONS), on loop 0.
#include <algorithm>

#include "mcp/mcp_server.h"

namespace pgwarden::mcp {

std::vector<McpServer::SessionView> McpServer::sessionViews() const {
  std::vector<SessionView> out;
  out.reserve(sessions_.size());
  const uint64_t now = uv_now(loop_);
  for (const auto& [id, s] : sessions_) {
    SessionView v;
    v.history_id = s.history_id;
    v.user = s.who.user;
    v.group = s.who.group;
    v.database = s.who.database;
    v.client_name = s.client_name;
    v.client_version = s.client_version;
    v.protocol_version = s.protocol_version;
    v.peer_host = s.peer_host;
    v.idle_ms = now > s.last_used_ms ? now - s.last_used_ms : 0;
    v.in_flight = s.in_flight;
    v.initialized = s.initialized;
    out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end(),
            [](const SessionView& a, const SessionView& b) { return a.history_id < b.history_id; });
  return out;
}

}  // namespace pgwarden::mcp
