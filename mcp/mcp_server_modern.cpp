// The 2026-07-28 requests of the MCP endpoint: each POST carries its protocol version, client and
// capabilities in `_meta` and is served on its own, without a session (server/discover,
// tools/list, tools/call). The caller is the request's token; its conversation is the one the
// request names (`_meta.conversation_id` or the tool's `conversation_id` argument), else one of
// its own. A guarded write transaction is the one thing held between requests: begin answers
// with a signed handle (mcp/txn_handle.h) that the later calls of the transaction pass back.
#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "mcp/mcp_server.h"
#include "mcp/modern_era.h"
#include "mcp/result_json.h"
#include "mcp/token_auth.h"
#include "mcp/tools.h"
#include "mcp/write_tools.h"

namespace pgwarden::mcp {

namespace {

constexpr int kBusy = -32000;

// A conversation for a call that names none: random, so no two requests share one by accident.
std::string newConversationId() { return "mcp-" + generateToken().substr(4, 24); }

// A call refused over its transaction handle: a tool result the agent reads (what happened to
// the transaction, and what to do), never a protocol error.
Json handleRefusal(const char* code, std::string message, const char* next_step,
                   Json extra = Json::object()) {
  Json out{{"code", code}, {"message", std::move(message)}, {"next_step", next_step}};
  out.update(extra);
  return toolResult(std::move(out), true, "pgwarden did not run the call:");
}

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
  auto who = identify(caller);
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
    const bool writes = who->policy && who->policy->writes().guarded;
    Json tools = toolsFor(*who, writes);
    if (writes) addHandleArgument(tools);
    Json result = cacheableResult({{"tools", std::move(tools)}}, kListTtlMs, "private");
    respondJson(exchange, 200, rpcResult(m.id, modernResult(std::move(result), version_)), sse);
    return;
  }
  startModernCall(exchange, req, caller, sse, m, std::move(*who), meta.client_name);
}

void McpServer::startModernCall(uint64_t exchange, const HttpRequest& req, const Caller& caller,
                                bool sse, const RpcMessage& m, McpIdentity who,
                                const std::string& client_name) {
  // Without sessions the cap on calls in flight is the caller's.
  const auto busy = modern_in_flight_.find(caller.principal);
  if (busy != modern_in_flight_.end() && busy->second >= config_.max_requests_per_session) {
    respondJson(exchange, 200,
                rpcError(m.id, kBusy,
                         "too many requests in flight for this caller; wait for one to finish"),
                sse);
    return;
  }
  host_.watchDatabase(who.server_database);
  RpcMessage call = m;
  Session* held = nullptr;
  if (auto refused = modernTransaction(call, caller, who, client_name, req, &held)) {
    respondJson(exchange, 200, rpcResult(m.id, modernResult(std::move(*refused), version_)), sse);
    return;
  }
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
  ex.traceparent = req.header("traceparent");
  ex.responses.emplace_back(nullptr);
  Json response;
  if (startToolCall(ex, 0, held ? *held : s, call, response)) {
    ex.responses[0] = std::move(response);
    sendExchange(ex);
    return;
  }
  ++ex.outstanding;
  calls_[next_call_].principal = caller.principal;
  ++modern_in_flight_[caller.principal];
}

std::optional<Json> McpServer::modernTransaction(RpcMessage& m, const Caller& caller,
                                                 const McpIdentity& who,
                                                 const std::string& client_name,
                                                 const HttpRequest& req, Session** held) {
  if (!who.policy || !who.policy->writes().guarded || !m.params.is_object()) return std::nullopt;
  const auto tool = toolByName(m.params.value("name", std::string()));
  if (!tool) return std::nullopt;
  if (handle_key_.boot.empty() &&
      !makeHandleKey(config_.instance_id, config_.handle_key, &handle_key_)) {
    return handleRefusal("INTERNAL", "pgwarden could not make a transaction key", "try again");
  }
  Json& args = m.params["arguments"];
  const auto given = args.is_object() ? args.find("transaction_handle") : args.end();
  if (args.is_object() && given != args.end()) {
    if (!given->is_string()) return std::nullopt;  // the schema check names the wrong argument
    const std::string handle = given->get<std::string>();
    args.erase("transaction_handle");
    const HandleCheck h = checkTxnHandle(handle_key_, handle);
    switch (h.kind) {
      case HandleCheck::Kind::kInvalid:
        return handleRefusal(
            "TRANSACTION_HANDLE_INVALID",
            "This is not a transaction handle pgwarden made, or it was altered; "
            "nothing was run.",
            "call begin for a new transaction, or pass the handle exactly as begin returned it");
      case HandleCheck::Kind::kElsewhere:
        return handleRefusal("TRANSACTION_ELSEWHERE",
                             "This transaction is held by pgwarden instance \"" + h.instance +
                                 "\", not this one (\"" + handle_key_.instance +
                                 "\"); nothing was run here. Send the call to that instance.",
                             "send the call to the instance the handle names",
                             {{"instance", h.instance}, {"handle_verified", h.verified}});
      case HandleCheck::Kind::kRestarted:
        return handleRefusal(
            "TRANSACTION_ROLLED_BACK",
            "pgwarden restarted since this transaction began: it was rolled back "
            "when the process that held it ended, and nothing of it was committed.",
            "call begin and make the changes again", {{"reason", "restart"}});
      case HandleCheck::Kind::kOurs:
        break;
    }
    const auto it = sessions_.find(h.holder);
    if (it == sessions_.end() || it->second.who.user != caller.user) {
      const EndedSessions::Ended* e = ended_.find(h.holder);
      if (e == nullptr || e->user != caller.user) {
        return handleRefusal("TRANSACTION_NOT_FOUND",
                             "No transaction of yours has this handle (it ended long ago).",
                             "call begin for a new transaction");
      }
      return handleRefusal(
          e->rolled_back ? "TRANSACTION_ROLLED_BACK" : "TRANSACTION_ENDED",
          "This transaction's holder ended (" + sessionEndText(e->why) + ")" +
              (e->rolled_back
                   ? "; the open transaction was rolled back, nothing of it was committed."
                   : "; no transaction was open then."),
          "call begin for a new transaction",
          {{"reason", sessionEndCode(e->why)}, {"transaction_rolled_back", e->rolled_back}});
    }
    it->second.last_used_ms = uv_now(loop_);
    *held = &it->second;
    return std::nullopt;
  }
  if (*tool != Tool::kBegin) {
    if (!isWriteTool(*tool)) return std::nullopt;  // a read outside any transaction
    return handleRefusal(
        "TRANSACTION_HANDLE_REQUIRED",
        std::string(toolName(*tool)) +
            " runs inside a transaction: pass the transaction_handle begin returned.",
        "call begin, then pass its transaction_handle");
  }
  // begin: a new holder, admitted as a session is (the caps, eviction of idle ones).
  Exchange room;
  if (auto refused = admit(room, m.id, caller.principal)) {
    return handleRefusal(
        "TOO_MANY_TRANSACTIONS",
        "pgwarden holds as many sessions and transactions as it may; finish one first.",
        "commit or roll back an open transaction, then call begin again");
  }
  Session s;
  s.id = randomHexId();  // a holder: a session reached by its handle only
  if (s.id.empty())
    return handleRefusal("INTERNAL", "pgwarden could not make a transaction id", "try again");
  s.who = who;
  s.principal = caller.principal;
  s.protocol_version = kModernProtocolVersion;
  s.client_name = client_name;
  s.peer_host = req.peer_host;
  s.history_id = host_.nextSessionId();
  s.last_used_ms = uv_now(loop_);
  s.initialized = true;
  s.writes = std::make_shared<WriteConversation>(host_, s.who, s.history_id);
  s.handle = mintTxnHandle(handle_key_, s.id);
  spdlog::info("mcp transaction holder {} started: user={} group={} client={} peer={}",
               s.history_id, logsafe(s.who.user), s.who.group, logsafe(s.client_name),
               logsafe(s.peer_host));
  ++counters_.sessions_started;
  const std::string id = s.id;
  *held = &sessions_.emplace(id, std::move(s)).first->second;
  return std::nullopt;
}

}  // namespace pgwarden::mcp
