#include "mcp/session_streams.h"

#include <iterator>

#include "net/http_transport.h"

namespace pgwarden::mcp {

namespace {

constexpr const char* kLevelNames[] = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};

// An SSE comment: ignored by every client, but traffic for the proxies in between.
constexpr std::string_view kKeepaliveComment = ": keepalive\n\n";

}  // namespace

std::optional<LogLevel> parseLogLevel(std::string_view name) {
  for (size_t i = 0; i < std::size(kLevelNames); ++i) {
    if (name == kLevelNames[i]) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

const char* logLevelName(LogLevel level) { return kLevelNames[static_cast<size_t>(level)]; }

std::string sseEvent(const Json& message) { return "event: message\ndata: " + dumpJson(message) + "\n\n"; }

Json logNotification(LogLevel level, std::string_view event, std::string_view message, Json extra) {
  Json data = extra.is_object() ? std::move(extra) : Json::object();
  data["event"] = event;
  data["message"] = message;
  return Json{{"jsonrpc", "2.0"},
              {"method", "notifications/message"},
              {"params", {{"level", logLevelName(level)}, {"logger", "pgwarden"}, {"data", std::move(data)}}}};
}

Json toolsListChangedNotification() {
  return Json{{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}};
}

void SessionStreams::open(const std::string& session, uint64_t exchange, uint64_t now_ms) {
  end(session);
  by_session_[session] = Open{exchange, now_ms};
  by_exchange_[exchange] = session;
}

bool SessionStreams::abandoned(uint64_t exchange) {
  auto it = by_exchange_.find(exchange);
  if (it == by_exchange_.end()) return false;
  by_session_.erase(it->second);
  by_exchange_.erase(it);
  return true;
}

void SessionStreams::end(const std::string& session) {
  auto it = by_session_.find(session);
  if (it == by_session_.end()) return;
  const uint64_t exchange = it->second.exchange;
  by_exchange_.erase(exchange);
  by_session_.erase(it);
  if (transport_) transport_->finish(exchange);
}

void SessionStreams::endAll() {
  if (transport_) {
    for (const auto& [session, s] : by_session_) transport_->finish(s.exchange);
  }
  by_session_.clear();
  by_exchange_.clear();
}

bool SessionStreams::write(const std::string& session, Open& s, std::string_view bytes, uint64_t now_ms) {
  if (transport_ && transport_->send(s.exchange, bytes)) {
    s.last_write_ms = now_ms;
    return true;
  }
  // Gone or dropped for not reading: forget it; the client may open another.
  by_exchange_.erase(s.exchange);
  by_session_.erase(session);
  return false;
}

bool SessionStreams::send(const std::string& session, const Json& message, uint64_t now_ms) {
  auto it = by_session_.find(session);
  if (it == by_session_.end()) return false;
  const std::string key = it->first;  // write() may erase the entry `session` could refer to
  return write(key, it->second, sseEvent(message), now_ms);
}

void SessionStreams::keepalive(uint64_t now_ms) {
  std::vector<std::string> quiet;
  for (const auto& [session, s] : by_session_) {
    if (now_ms - s.last_write_ms >= kKeepaliveMs) quiet.push_back(session);
  }
  for (const auto& session : quiet) {
    auto it = by_session_.find(session);
    if (it != by_session_.end()) write(session, it->second, kKeepaliveComment, now_ms);
  }
}

}  // namespace pgwarden::mcp
