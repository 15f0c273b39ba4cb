// The 2026-07-28 requests of the MCP endpoint: each POST carries its protocol version, client and
// capabilities in `_meta` and is served on its own, without a session (server/discover,
// tools/list, tools/call). The caller is the request's token; its conversation is the one the
// request names (`_meta.conversation_id` or the tool's `conversation_id` argument), else one of
// its own. Guarded write transactions live in a session and so stay with the 2025 revisions.
#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "mcp/mcp_server.h"
#include "mcp/modern_era.h"
#include "mcp/token_auth.h"
#include "mcp/tools.h"

namespace pgwarden::mcp {

namespace {

constexpr int kBusy = -32000;

// A conversation for a call that names none: random, so no two requests share one by accident.
std::string newConversationId() { return "mcp-" + generateToken().substr(4, 24); }

}  // namespace

void McpServer::handleModern(uint64_t exchange, const HttpRequest& req, const Caller& caller,
                             bool sse) {
  RpcParse parsed = parseRpcBody(req.body, /*allow_batch=*/false);
  if (parsed.messages.empty()) {
    respondJson(exchange, 400,
                parsed.errors.empty() ? rpcError(nullptr, kInvalidRequest, "Invalid Request")
                                      : parsed.errors.front(),
                sse);
    return;
  }
  const RpcMessage& m = parsed.messages.front();
  if (m.kind == RpcMessage::Kind::kNotification) {
    // Nothing to act on: over HTTP this revision cancels by closing the response stream.
    respondPlain(exchange, 202, "");
    return;
  }
  if (m.kind == RpcMessage::Kind::kResponse) {
    respondJson(
        exchange, 400,
        rpcError(nullptr, kInvalidRequest, "Invalid Request: pgwarden asks the client nothing"),
        sse);
    return;
  }
  ModernHeaders h;
  h.protocol_version = req.header("mcp-protocol-version");
  h.method = req.header("mcp-method");
  if (req.hasHeader("mcp-name")) h.name = req.header("mcp-name");
  ModernMeta meta;
  if (auto refused = checkModernRequest(m, h, meta)) {
    respondJson(exchange, refused->status, refused->body, sse);
    return;
  }
  const bool discover = m.method == "server/discover";
  if (!discover && m.method != "tools/list" && m.method != "tools/call") {
    // The revision's answer to a method a server does not implement: 404 with -32601.
    respondJson(exchange, 404,
                rpcError(m.id, kMethodNotFound, "Method not found: " + m.method.substr(0, 100)),
                sse);
    return;
  }
  if (discover) {
    Json result = {{"supportedVersions", supportedVersions()},
                   {"capabilities", {{"tools", Json::object()}}},
                   {"instructions", kServerInstructions}};
    respondJson(
        exchange, 200,
        rpcResult(m.id,
                  modernResult(cacheableResult(std::move(result), kListTtlMs, "public"), version_)),
        sse);
    return;
  }
  auto who = host_.identify(caller.user);
  if (!who) {
    spdlog::warn(
        "mcp: user \"{}\" cannot run statements (unknown user, or mcp.database is not mapped)",
        logsafe(caller.user));
    respondJson(exchange, 200,
                rpcError(m.id, kInternalError, "this user cannot run statements through pgwarden"),
                sse);
    return;
  }
  if (m.method == "tools/list") {
    // The list depends on the caller's group: cached per authorization context only.
    Json result =
        cacheableResult({{"tools", toolsFor(*who, /*writes=*/false)}}, kListTtlMs, "private");
    respondJson(exchange, 200, rpcResult(m.id, modernResult(std::move(result), version_)), sse);
    return;
  }
  startModernCall(exchange, req, caller, sse, m, std::move(*who), meta.client_name);
}

void McpServer::startModernCall(uint64_t exchange, const HttpRequest& req, const Caller& caller,
                                bool sse, const RpcMessage& m, McpIdentity who,
                                const std::string& client_name) {
  // Without sessions the cap on calls in flight is the caller's.
  const auto held = modern_in_flight_.find(caller.principal);
  if (held != modern_in_flight_.end() && held->second >= config_.max_requests_per_session) {
    respondJson(exchange, 200,
                rpcError(m.id, kBusy,
                         "too many requests in flight for this caller; wait for one to finish"),
                sse);
    return;
  }
  host_.watchDatabase(who.server_database);
  // A one-call session: startToolCall's context (identity, agent, default conversation, history's
  // session id) without an entry in sessions_.
  Session s;
  s.id = newConversationId();
  s.who = std::move(who);
  s.principal = caller.principal;
  s.protocol_version = kModernProtocolVersion;
  s.client_name = client_name;
  s.peer_host = req.peer_host;
  s.history_id = host_.nextSessionId();
  Exchange& ex = exchanges_[exchange];
  ex.http = exchange;
  ex.sse = sse;
  ex.modern = true;
  ex.responses.emplace_back(nullptr);
  Json response;
  if (startToolCall(ex, 0, s, m, response)) {
    ex.responses[0] = std::move(response);
    sendExchange(ex);
    return;
  }
  ++ex.outstanding;
  calls_[next_call_].principal = caller.principal;
  ++modern_in_flight_[caller.principal];
}

}  // namespace pgwarden::mcp
