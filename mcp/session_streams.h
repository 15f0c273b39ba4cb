// The server-to-client half of MCP's Streamable HTTP transport: one SSE stream per session (the
// client's GET), the notifications sent on it (notifications/tools/list_changed and the logging
// capability's notifications/message), and the comment keepalives that stop proxies dropping a
// quiet stream. A session without a stream simply misses them, as the specification allows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mcp/jsonrpc.h"

namespace pgwarden::net {
class HttpTransport;
}  // namespace pgwarden::net

namespace pgwarden::daemon {}  // namespace pgwarden::daemon

namespace pgwarden::mcp {

using net::HttpTransport;

// The logging capability's levels (RFC 5424 severities), least severe first.
enum class LogLevel : uint8_t { kDebug, kInfo, kNotice, kWarning, kError, kCritical, kAlert, kEmergency };
std::optional<LogLevel> parseLogLevel(std::string_view name);
const char* logLevelName(LogLevel level);

// One SSE event carrying a JSON-RPC message, as POST answers and the GET stream both frame it.
std::string sseEvent(const Json& message);
// notifications/message from pgwarden's logger: `event` names what happened (a stable word an
// agent may switch on), `message` says it for a reader; `extra` fields join them in `data`.
Json logNotification(LogLevel level, std::string_view event, std::string_view message, Json extra = Json::object());
Json toolsListChangedNotification();

// The open GET streams by session. The transport writes and bounds them (a client that stops
// reading loses its stream); this keeps which exchange is whose and when each last spoke.
class SessionStreams {
 public:
  // How long a stream may stay silent before a comment line is sent on it.
  static constexpr uint64_t kKeepaliveMs = 20000;

  void attach(net::HttpTransport* transport) { transport_ = transport; }
  // `exchange` (already answered with the stream's headers) is now `session`'s stream. A session
  // has at most one: an older stream is ended, so a client that reconnects after a network drop
  // the server has not noticed yet is not locked out.
  void open(const std::string& session, uint64_t exchange, uint64_t now_ms);
  // The client of `exchange` went away; true when it was a stream.
  bool abandoned(uint64_t exchange);
  // Ends the session's stream once what is queued on it is written.
  void end(const std::string& session);
  void endAll();
  bool has(const std::string& session) const { return by_session_.count(session) != 0; }
  // Sends `message` on the session's stream; false when it has none (or it was just dropped
  // because its client does not read).
  bool send(const std::string& session, const Json& message, uint64_t now_ms);
  // A comment on every stream silent for kKeepaliveMs.
  void keepalive(uint64_t now_ms);
  size_t size() const { return by_session_.size(); }

 private:
  struct Open {
    uint64_t exchange = 0;
    uint64_t last_write_ms = 0;
  };
  bool write(const std::string& session, Open& s, std::string_view bytes, uint64_t now_ms);

  net::HttpTransport* transport_ = nullptr;
  std::unordered_map<std::string, Open> by_session_;
  std::unordered_map<uint64_t, std::string> by_exchange_;
};

}  // namespace pgwarden::mcp
