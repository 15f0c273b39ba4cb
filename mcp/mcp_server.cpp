#include "mcp/mcp_server.h"

#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "mcp/jwks_fetcher.h"
#include "mcp/modern_era.h"
#include "mcp/result_json.h"
#include "mcp/token_auth.h"
#include "mcp/tools.h"

namespace pgwarden::mcp {

namespace {

constexpr uint64_t kTimerMs = 1000;
constexpr int kServerBusy = -32000;
// How long before an idle session expires its stream is warned (at most; half the timeout when
// that is shorter).
constexpr uint64_t kExpiryWarningMs = 60000;

using Headers = std::vector<std::pair<std::string, std::string>>;

std::string newSessionId() { return randomHexId(); }

bool contains(std::string_view haystack, std::string_view needle) {
  if (needle.size() > haystack.size()) return false;
  for (size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    bool eq = true;
    for (size_t j = 0; j < needle.size() && eq; ++j) {
      char c = haystack[i + j];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      eq = c == needle[j];
    }
    if (eq) return true;
  }
  return false;
}

}  // namespace

McpServer::McpServer(uv_loop_t* loop, McpHost& host, config::McpConfig config, std::string version,
                     std::shared_ptr<const net::TlsContext> tls)
    : loop_(loop),
      host_(host),
      config_(std::move(config)),
      version_(std::move(version)),
      tls_(std::move(tls)) {}

McpServer::~McpServer() { close(); }

Status McpServer::start() {
  HttpTransportOptions o;
  o.name = "mcp";
  o.listen = config_.listen;
  o.max_connections = static_cast<size_t>(config_.max_connections);
  o.max_body_bytes = config_.max_body_bytes;
  o.read_timeout = config_.read_timeout;
  o.keepalive_timeout = config_.keepalive_timeout;
  o.tls = tls_;
  listen_loopback_ = isLoopbackListen(config_.listen);
  transport_ = HttpTransport::create(loop_, o, this);
  if (auto st = transport_->start(); !st.ok()) {
    transport_.reset();
    return st;
  }
  streams_.attach(transport_.get());
  followJwksUrl();
  timer_ = new uv_timer_t;
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  uv_timer_start(timer_, &McpServer::onTimer, kTimerMs, kTimerMs);
  uv_unref(reinterpret_cast<uv_handle_t*>(timer_));
  sweeper_ = std::make_unique<pool::NextTurn>(loop_, [this] { sweep(); });
  spdlog::info(
      "mcp: listening on {}{} (path {}, {} token(s){}{})", tls_ ? "https://" : "http://",
      config_.listen, config_.path, config_.tokens.size(),
      config_.oauth.enabled() ? ", OAuth access tokens of " + config_.oauth.issuer : std::string(),
      config_.trust_loopback.empty()
          ? std::string()
          : ", loopback clients without a token run as user \"" + config_.trust_loopback + "\"");
  return {};
}

void McpServer::close() {
  jwks_fetcher_.reset();
  // Streams end after what is queued on them (the shutdown notice) is written; the transport's
  // close leaves connections already ending alone.
  streams_.endAll();
  streams_.attach(nullptr);
  if (transport_) {
    transport_->close();
    transport_.reset();
  }
  if (timer_) {
    timer_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(timer_), &McpServer::onTimerClosed);
    timer_ = nullptr;
  }
  // Every call ends now; their runners give their server connections back.
  std::vector<std::unique_ptr<RunningCall>> ending;
  for (auto& [k, c] : calls_) {
    c.call->cancel();
    ending.push_back(std::move(c.call));
  }
  calls_.clear();
  exchanges_.clear();
  sessions_.clear();
  graveyard_.clear();
  ending.clear();
  if (sweeper_) {
    sweeper_->close();
    sweeper_.reset();
  }
}

void McpServer::beginDrain() {
  if (draining_) return;
  draining_ = true;
  for (const auto& [id, s] : sessions_) {
    tell(s, LogLevel::kWarning, "server_shutting_down",
         "pgwarden is shutting down: calls in flight may finish, new requests are refused; reconnect later");
  }
  if (!calls_.empty()) spdlog::info("mcp: shutting down; waiting for {} tool call(s) in flight", calls_.size());
}

void McpServer::onTimerClosed(uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); }

void McpServer::onTimer(uv_timer_t* t) {
  auto* self = static_cast<McpServer*>(t->data);
  if (!self) return;
  self->expireSessions();
  self->streams_.keepalive(uv_now(self->loop_));
}

void McpServer::setConfig(config::McpConfig config) {
  // The listener and its limits stay as started; who may call and as whom follows the reload.
  // Sessions with a stream learn when their tool list changed (others at their next tools/list).
  std::vector<std::pair<std::string, std::string>> before;
  for (const auto& [id, s] : sessions_) {
    if (streams_.has(id)) before.emplace_back(id, dumpJson(toolsFor(s)));
  }
  config_.tokens = std::move(config.tokens);
  config_.oauth = std::move(config.oauth);
  followJwksUrl();
  config_.trust_loopback = std::move(config.trust_loopback);
  config_.allowed_origins = std::move(config.allowed_origins);
  config_.max_sessions = config.max_sessions;
  config_.max_sessions_per_principal = config.max_sessions_per_principal;
  config_.max_requests_per_session = config.max_requests_per_session;
  config_.session_idle_timeout = config.session_idle_timeout;
  config_.max_rows = config.max_rows;
  config_.max_result_bytes = config.max_result_bytes;
  config_.database = config.database;
  config_.tools = std::move(config.tools);
  for (const auto& [id, tools] : before) {
    auto it = sessions_.find(id);
    if (it != sessions_.end() && dumpJson(toolsFor(it->second)) != tools) {
      streams_.send(id, toolsListChangedNotification(), uv_now(loop_));
    }
  }
}

void McpServer::sweep() { graveyard_.clear(); }

// ----- HTTP ------------------------------------------------------------------------------------

void McpServer::respondPlain(uint64_t exchange, int status, std::string text, Headers headers) {
  HttpResponse r;
  r.status = status;
  r.headers = std::move(headers);
  if (!text.empty()) {
    r.content_type = "text/plain; charset=utf-8";
    r.body = std::move(text) + "\n";
  }
  r.close = draining_;
  if (transport_) transport_->respond(exchange, std::move(r));
}

void McpServer::respondJson(uint64_t exchange, int status, const Json& body, bool sse, Headers headers) {
  HttpResponse r;
  r.status = status;
  r.headers = std::move(headers);
  // While draining, every answer ends its connection, so the listener's close finds none idle.
  r.close = draining_;
  if (sse) {
    r.content_type = "text/event-stream";
    r.body = sseEvent(body);
  } else {
    r.content_type = "application/json";
    r.body = dumpJson(body);
  }
  if (transport_) transport_->respond(exchange, std::move(r));
}

void McpServer::onHttpRequest(uint64_t exchange, HttpRequest&& req) {
  ++counters_.http_requests;
  if (serveResourceMetadata(exchange, req)) return;
  if (req.path != config_.path) {
    respondPlain(exchange, 404, "not found");
    return;
  }
  // DNS rebinding: a browser page on another site must not reach a local endpoint.
  if (req.hasHeader("origin") && !originAllowed(req.header("origin"), config_.allowed_origins)) {
    ++counters_.forbidden_origin;
    respondJson(exchange, 403, rpcError(nullptr, kInvalidRequest, "Forbidden: Origin not allowed"), false);
    return;
  }
  if (listen_loopback_ && req.hasHeader("host") && !hostAllowed(req.header("host"), config_.allowed_origins)) {
    ++counters_.forbidden_origin;
    respondJson(exchange, 403, rpcError(nullptr, kInvalidRequest, "Forbidden: Host not allowed"), false);
    return;
  }
  const auto caller = authenticate(exchange, req);
  if (!caller) return;
  if (draining_ && req.method != "DELETE") {
    respondPlain(exchange, 503, "pgwarden is shutting down", {{"Retry-After", "5"}});
  } else if (req.method == "POST") {
    handlePost(exchange, req, *caller);
  } else if (modernProtocolVersion(req.header("mcp-protocol-version"))) {
    // 2026-07-28 has neither the GET stream nor sessions to DELETE.
    respondPlain(exchange, 405, "method not allowed in protocol version 2026-07-28",
                 {{"Allow", "POST"}});
  } else if (req.method == "GET") {
    handleGet(exchange, req, caller->user);
  } else if (req.method == "DELETE") {
    handleDelete(exchange, req, caller->user);
  } else {
    respondPlain(exchange, 405, "method not allowed", {{"Allow", "GET, POST, DELETE"}});
  }
}

void McpServer::onHttpAbandoned(uint64_t exchange) {
  if (streams_.abandoned(exchange)) return;
  auto it = exchanges_.find(exchange);
  if (it == exchanges_.end()) return;
  exchanges_.erase(it);
  // Its calls are no longer wanted: cancel what runs (the answers are dropped when they come).
  for (auto& [k, c] : calls_) {
    if (c.exchange == exchange && c.call) c.call->cancel();
  }
}

void McpServer::handleDelete(uint64_t exchange, const HttpRequest& req, const std::string& user) {
  const std::string id(req.header("mcp-session-id"));
  auto it = sessions_.find(id);
  if (id.empty() || it == sessions_.end() || it->second.who.user != user ||
      !it->second.handle.empty()) {
    respondPlain(exchange, 404, "no such session");
    return;
  }
  endSession(id, SessionEnd::kDeleted);
  respondPlain(exchange, 200, "");
}

bool McpServer::versionRejected(uint64_t exchange, const HttpRequest& req, bool sse) {
  const std::string_view version = req.header("mcp-protocol-version");
  if (version.empty() || supportedProtocolVersion(version)) return false;
  respondJson(exchange, 400, unsupportedVersionError(nullptr, version), sse);
  return true;
}

void McpServer::handleGet(uint64_t exchange, const HttpRequest& req, const std::string& user) {
  // A GET asks for the session's server-to-client stream, which only an SSE reader can take.
  if (!contains(req.header("accept"), "text/event-stream")) {
    respondJson(exchange, 406, rpcError(nullptr, kInvalidRequest, "Not Acceptable: a GET stream needs Accept: text/event-stream"), false);
    return;
  }
  if (versionRejected(exchange, req, false)) return;
  const std::string sid(req.header("mcp-session-id"));
  if (sid.empty()) {
    respondJson(exchange, 400, rpcError(nullptr, kInvalidRequest, "Bad Request: Mcp-Session-Id header is required"), false);
    return;
  }
  auto it = sessions_.find(sid);
  if (it == sessions_.end() || it->second.who.user != user || !it->second.handle.empty()) {
    respondJson(exchange, 404, sessionNotFound(ended_, sid, user), false);
    return;
  }
  it->second.last_used_ms = uv_now(loop_);
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/event-stream";
  r.stream = true;
  if (!transport_) return;
  transport_->respond(exchange, std::move(r));
  streams_.open(sid, exchange, uv_now(loop_));
}

void McpServer::handlePost(uint64_t exchange, const HttpRequest& req, const Caller& caller) {
  const std::string& user = caller.user;
  const std::string_view ctype = req.header("content-type");
  if (!contains(ctype, "application/json")) {
    respondJson(exchange, 415, rpcError(nullptr, kInvalidRequest, "Unsupported Media Type: use application/json"), false);
    return;
  }
  const std::string_view accept = req.header("accept");
  const bool accepts_json = accept.empty() || contains(accept, "application/json") || contains(accept, "*/*") ||
                            contains(accept, "application/*");
  const bool accepts_sse = contains(accept, "text/event-stream");
  if (!accepts_json && !accepts_sse) {
    respondJson(exchange, 406, rpcError(nullptr, kInvalidRequest,
                                        "Not Acceptable: accept application/json or text/event-stream"), false);
    return;
  }
  const bool sse = accepts_sse && !accepts_json;
  if (looksModern(req.header("mcp-protocol-version"), req.hasHeader("mcp-session-id"), req.body)) {
    handleModern(exchange, req, caller, sse);
    return;
  }
  if (versionRejected(exchange, req, sse)) return;
  Session* session = nullptr;
  const std::string sid(req.header("mcp-session-id"));
  if (!sid.empty()) {
    auto it = sessions_.find(sid);
    if (it == sessions_.end() || it->second.who.user != user || !it->second.handle.empty()) {
      respondJson(exchange, 404, sessionNotFound(ended_, sid, user), sse);
      return;
    }
    session = &it->second;
    session->last_used_ms = uv_now(loop_);
  }
  const bool allow_batch = session == nullptr || session->protocol_version == "2025-03-26";
  RpcParse parsed = parseRpcBody(req.body, allow_batch);
  if (parsed.messages.empty()) {
    // Nothing valid: the error(s) alone, with 400 as the reference servers answer.
    if (parsed.batch && parsed.errors.size() > 1) {
      respondJson(exchange, 400, Json(parsed.errors), sse);
    } else {
      respondJson(exchange, 400, parsed.errors.empty() ? rpcError(nullptr, kInvalidRequest, "Invalid Request")
                                                       : parsed.errors.front(), sse);
    }
    return;
  }
  bool has_initialize = false;
  for (const auto& m : parsed.messages) has_initialize = has_initialize || m.method == "initialize";
  if (has_initialize && (parsed.batch || parsed.messages.size() != 1)) {
    respondJson(exchange, 400, rpcError(nullptr, kInvalidRequest, "Invalid Request: initialize must be sent alone"), sse);
    return;
  }
  if (!session && !has_initialize) {
    respondJson(exchange, 400, rpcError(nullptr, kInvalidRequest,
                                        "Bad Request: Mcp-Session-Id header is required (initialize first)"), sse);
    return;
  }
  Exchange& ex = exchanges_[exchange];
  ex.http = exchange;
  ex.batch = parsed.batch;
  ex.sse = sse;
  ex.traceparent = req.header("traceparent");
  for (auto& e : parsed.errors) ex.responses.push_back(std::move(e));
  bool any_request = !ex.responses.empty();
  for (const auto& m : parsed.messages) {
    if (m.kind != RpcMessage::Kind::kRequest) {
      Json ignored;
      handleMessage(ex, 0, session, m, req, caller, ignored);
      continue;
    }
    any_request = true;
    const size_t slot = ex.responses.size();
    ex.responses.emplace_back(nullptr);
    Json response;
    if (handleMessage(ex, slot, session, m, req, caller, response)) {
      ex.responses[slot] = std::move(response);
    } else {
      ++ex.outstanding;
    }
  }
  if (!any_request) {
    exchanges_.erase(exchange);
    respondPlain(exchange, 202, "");
    return;
  }
  if (ex.outstanding == 0) sendExchange(ex);
}

void McpServer::sendExchange(Exchange& ex) {
  const uint64_t id = ex.http;
  Headers headers;
  if (!ex.session_id.empty()) headers.emplace_back("Mcp-Session-Id", ex.session_id);
  Json body;
  if (ex.batch) {
    body = Json::array();
    for (auto& r : ex.responses) body.push_back(std::move(r));
  } else {
    body = ex.responses.empty() ? Json(nullptr) : std::move(ex.responses.front());
    if (ex.modern && body.contains("result"))
      body["result"] = modernResult(std::move(body["result"]), version_);
  }
  const bool sse = ex.sse;
  const int status = ex.status;
  if (status != 200) headers.emplace_back("Retry-After", status == 429 ? "60" : "5");
  exchanges_.erase(id);
  respondJson(id, status, body, sse, std::move(headers));
}

// ----- JSON-RPC --------------------------------------------------------------------------------

bool McpServer::handleMessage(Exchange& ex, size_t slot, Session* session, const RpcMessage& m,
                              const HttpRequest& req, const Caller& caller, Json& response) {
  if (m.kind == RpcMessage::Kind::kResponse) return true;  // pgwarden asks the client nothing
  if (m.kind == RpcMessage::Kind::kNotification) {
    if (!session) return true;
    if (m.method == "notifications/initialized") {
      session->initialized = true;
    } else if (m.method == "notifications/cancelled" && m.params.is_object()) {
      const auto rid = m.params.find("requestId");
      if (rid != m.params.end()) {
        const std::string key = rid->dump();
        for (auto& [k, c] : calls_) {
          if (c.session_id == session->id && c.rpc_id == key && c.call) c.call->cancel();
        }
      }
    }
    return true;
  }
  if (m.method == "initialize") {
    response = initialize(ex, m, req, caller);
    return true;
  }
  if (!session) {
    response = rpcError(m.id, kInvalidRequest, "Invalid Request: no session");
    return true;
  }
  if (m.method == "ping") {
    response = rpcResult(m.id, Json::object());
    return true;
  }
  if (m.method == "tools/list") {
    response = rpcResult(m.id, {{"tools", toolsFor(*session)}});
    return true;
  }
  if (m.method == "tools/call") return startToolCall(ex, slot, *session, m, response);
  if (m.method == "logging/setLevel") {
    const auto level = m.params.is_object() ? m.params.find("level") : m.params.end();
    const auto parsed = level != m.params.end() && level->is_string()
                            ? parseLogLevel(level->get_ref<const std::string&>())
                            : std::nullopt;
    if (!parsed) {
      response = rpcError(m.id, kInvalidParams,
                          "Invalid params: level must be one of debug, info, notice, warning, error, "
                          "critical, alert, emergency");
      return true;
    }
    session->log_level = *parsed;
    response = rpcResult(m.id, Json::object());
    return true;
  }
  response = rpcError(m.id, kMethodNotFound, "Method not found: " + m.method.substr(0, 100));
  return true;
}

Json McpServer::initialize(Exchange& ex, const RpcMessage& m, const HttpRequest& req,
                           const Caller& caller) {
  const std::string& user = caller.user;
  if (!m.params.is_object()) return rpcError(m.id, kInvalidParams, "Invalid params: initialize needs params");
  const auto pv = m.params.find("protocolVersion");
  if (pv == m.params.end() || !pv->is_string()) {
    return rpcError(m.id, kInvalidParams, "Invalid params: protocolVersion is required");
  }
  const std::string asked = pv->get<std::string>();
  const std::string version = supportedProtocolVersion(asked) ? asked : std::string(std::end(kProtocolVersions)[-1]);
  auto who = identify(caller);
  if (!who) {
    spdlog::warn("mcp: user \"{}\" cannot run statements (unknown user, or mcp.database is not mapped)",
                 logsafe(user));
    return rpcError(m.id, kInternalError, "this user cannot run statements through pgwarden");
  }
  if (auto refused = admit(ex, m.id, caller.principal)) return std::move(*refused);
  Session s;
  s.id = newSessionId();
  if (s.id.empty()) return rpcError(m.id, kInternalError, "could not make a session id");
  s.who = std::move(*who);
  s.principal = caller.principal;
  s.protocol_version = version;
  s.peer_host = req.peer_host;
  s.history_id = host_.nextSessionId();
  s.last_used_ms = uv_now(loop_);
  if (const auto ci = m.params.find("clientInfo"); ci != m.params.end() && ci->is_object()) {
    s.client_name = ci->value("name", std::string()).substr(0, 256);
    s.client_version = ci->value("version", std::string()).substr(0, 64);
  }
  if (s.who.policy && s.who.policy->writes().guarded) {
    s.writes = std::make_shared<WriteConversation>(host_, s.who, s.history_id);
  }
  host_.watchDatabase(s.who.server_database);
  spdlog::info("mcp session {} started: user={} group={} client={} {} peer={} protocol={}", s.history_id,
               logsafe(s.who.user), s.who.group, logsafe(s.client_name), logsafe(s.client_version),
               logsafe(s.peer_host), version);
  ex.session_id = s.id;
  ++counters_.sessions_started;
  const char* writes = s.writes ? kWriteInstructions : "";
  sessions_.emplace(s.id, std::move(s));
  return rpcResult(
      m.id, {{"protocolVersion", version},
             {"capabilities", {{"tools", {{"listChanged", true}}}, {"logging", Json::object()}}},
             {"serverInfo", {{"name", "pgwarden"}, {"title", "pgwarden"}, {"version", version_}}},
             {"instructions", std::string(kServerInstructions) + writes}});
}

Json McpServer::toolsFor(const McpIdentity& who, bool writes) {
  ToolCaps caps;
  caps.max_rows = config_.max_rows;
  caps.statement_timeout_ms = who.statement_timeout_ms;
  caps.writes = writes;
  Json tools = toolList(caps);
  if (config_.tools) {
    for (const auto& t : config_.tools->all()) {
      if (t->visibleTo(who.group)) tools.push_back(operatorToolJson(*t, columnsOf(*t)));
    }
  }
  return tools;
}

const std::vector<ResultColumn>* McpServer::columnsOf(const OperatorTool& tool) const {
  const auto it = tool_columns_.find(tool.name + "\n" + tool.bound_sql);
  return it == tool_columns_.end() ? nullptr : &it->second;
}

bool McpServer::startToolCall(Exchange& ex, size_t slot, Session& s, const RpcMessage& m, Json& response) {
  const auto name = m.params.is_object() ? m.params.find("name") : m.params.end();
  if (!m.params.is_object() || name == m.params.end() || !name->is_string()) {
    response = rpcError(m.id, kInvalidParams, "Invalid params: tools/call needs a tool name");
    return true;
  }
  const std::string& tool_name = name->get_ref<const std::string&>();
  const auto tool = toolByName(tool_name);
  // An operator tool the session's group may not call is as unknown as one never configured.
  std::shared_ptr<const OperatorTool> op;
  if (!tool && config_.tools) {
    for (const auto& t : config_.tools->all()) {
      if (t->name == tool_name && t->visibleTo(s.who.group)) op = t;
    }
  }
  // The transaction's tools are a guarded_writes group's only.
  if ((!tool && !op) || (tool && isWriteTool(*tool) && !s.writes)) {
    response = rpcError(m.id, kInvalidParams, "Unknown tool: " + tool_name.substr(0, 100));
    return true;
  }
  Json args = m.params.contains("arguments") ? m.params["arguments"] : Json(nullptr);
  if (tool) {
    if (auto why = checkArguments(*tool, args, config_.max_rows)) {
      // From 2025-11-25 on a model reads and fixes these: a tool error, not a protocol error.
      response = s.protocol_version >= "2025-11-25"
                     ? rpcResult(m.id, invalidArgumentsResult(toolName(*tool), *why))
                     : rpcError(m.id, kInvalidParams,
                                "Invalid arguments for tool " + std::string(toolName(*tool)) +
                                    ": " + *why);
      return true;
    }
  } else if (!args.is_object() && !args.is_null()) {
    response = rpcError(m.id, kInvalidParams, "Invalid arguments for tool " + op->name + ": arguments must be an object");
    return true;
  }
  if (s.in_flight >= config_.max_requests_per_session) {
    response = rpcError(m.id, kServerBusy, "too many requests in flight in this session; wait for one to finish");
    return true;
  }
  CallContext ctx;
  ctx.who = s.who;
  ctx.agent_id = s.client_name;
  ctx.conversation_id = s.id;
  // A call may run under another conversation: an argument (of the built-in tools), or
  // _meta.conversation_id.
  if (tool && args.is_object() && args.contains("conversation_id") && args["conversation_id"].is_string()) {
    ctx.conversation_id = args["conversation_id"].get<std::string>();
  } else if (const auto meta = m.params.find("_meta"); meta != m.params.end() && meta->is_object()) {
    const auto c = meta->find("conversation_id");
    if (c != meta->end() && c->is_string() && !c->get_ref<const std::string&>().empty() &&
        c->get_ref<const std::string&>().size() <= 256) {
      ctx.conversation_id = c->get<std::string>();
    }
  }
  ctx.client_addr = s.peer_host;
  ctx.session_id = s.history_id;
  ctx.max_rows = config_.max_rows;
  ctx.max_result_bytes = config_.max_result_bytes;
  ctx.writes = s.writes;
  ctx.request_id = historyRequestId(m.id.dump());
  ctx.traceparent = requestTraceparent(m.params, ex.traceparent);
  ctx.transaction_handle = s.handle;
  const uint64_t key = ++next_call_;
  Call& c = calls_[key];
  c.exchange = ex.http;
  c.slot = slot;
  c.session_id = s.id;
  c.rpc_id = m.id.dump();
  c.tool = tool ? std::string(toolName(*tool)) : op->name;
  c.operator_tool = !tool;
  ++s.in_flight;
  // Kept here, not in the lambda: the call may answer inside start().
  auto done = [this, key](Json result, const char* outcome) { onToolDone(key, std::move(result), outcome); };
  if (tool && isWriteTool(*tool)) {
    c.call = makeWriteCall(host_, std::move(ctx), *tool, std::move(args), std::move(done));
  } else if (tool) {
    c.call = std::make_unique<ToolCall>(host_, std::move(ctx), *tool, std::move(args), std::move(done));
  } else {
    const std::string columns_key = op->name + "\n" + op->bound_sql;
    c.call = std::make_unique<OperatorToolCall>(
        host_, std::move(ctx), op, std::move(args), std::move(done),
        [this, columns_key](const std::string&, const std::vector<ResultColumn>& columns) {
          if (!tool_columns_.count(columns_key) && tool_columns_.size() < 4096) tool_columns_[columns_key] = columns;
        });
  }
  const Json id = m.id;
  RunningCall* raw = c.call.get();
  raw->start();
  // Answered at once (policy, list_*): the response is already in the exchange's slot.
  auto it = calls_.find(key);
  if (it == calls_.end()) {
    response = std::move(ex.responses[slot]);
    return true;
  }
  (void)id;
  return false;
}

void McpServer::onToolDone(uint64_t call_key, Json result, const char* outcome) {
  auto it = calls_.find(call_key);
  if (it == calls_.end()) return;
  Call c = std::move(it->second);
  calls_.erase(it);
  if (c.call) {
    for (size_t i = 0; i < std::size(kCallOutcomes); ++i) {
      if (std::string_view(outcome) != kCallOutcomes[i]) continue;
      if (c.operator_tool) {
        ++counters_.operator_tool_calls[c.tool][i];
      } else if (const auto t = toolByName(c.tool)) {
        ++counters_.tool_calls[static_cast<size_t>(*t)][i];
      }
    }
  }
  if (const auto p = modern_in_flight_.find(c.principal);
      p != modern_in_flight_.end() && --p->second <= 0) {
    modern_in_flight_.erase(p);
  }
  if (auto s = sessions_.find(c.session_id); s != sessions_.end()) {
    --s->second.in_flight;
    // What an agent may not see in the answer it is waiting for: its stream hears it too.
    const auto which = [&c] { return Json{{"tool", c.tool}, {"request_id", Json::parse(c.rpc_id, nullptr, false)}}; };
    if (std::string_view(outcome) == "cancelled") {
      tell(s->second, LogLevel::kWarning, "statement_cancelled",
           "a tool call's statement was cancelled before it finished (a cancel request, its statement "
           "timeout, or its client going away)", which());
    } else if (std::string_view(outcome) == "denied") {
      tell(s->second, LogLevel::kNotice, "statement_denied", "pgwarden refused a tool call's statement", which());
    }
  }
  if (c.call) {
    graveyard_.push_back(std::move(c.call));
    if (sweeper_) sweeper_->schedule();
  }
  auto ex = exchanges_.find(c.exchange);
  if (ex == exchanges_.end()) return;  // the client went away (or its session ended)
  Json id = Json::parse(c.rpc_id, nullptr, false);
  ex->second.responses[c.slot] = rpcResult(id, std::move(result));
  // A call answered inside start() is not counted as outstanding yet: handlePost sends it.
  if (ex->second.outstanding > 0 && --ex->second.outstanding == 0) sendExchange(ex->second);
}

// ----- sessions --------------------------------------------------------------------------------

void McpServer::tell(const Session& s, LogLevel level, std::string_view event, std::string_view message, Json extra) {
  if (level < s.log_level) return;
  streams_.send(s.id, logNotification(level, event, message, std::move(extra)), uv_now(loop_));
}

void McpServer::endSession(const std::string& id, SessionEnd why, bool tell_client) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  const std::string text = sessionEndText(why);
  if (tell_client) tell(it->second, LogLevel::kWarning, "session_ended", "session ended: " + text);
  streams_.end(id);
  // An open transaction, or one pgwarden rolled back that the agent has not heard of yet.
  const bool rolled_back =
      it->second.writes && it->second.writes->state() != session::TxnState::kNone;
  spdlog::info("mcp session {} ended: {}{} (user={} client={})", it->second.history_id, text,
               rolled_back ? "; its write transaction was rolled back" : "",
               logsafe(it->second.who.user), logsafe(it->second.client_name));
  ended_.remember(id, {it->second.who.user, why, rolled_back});
  // A cancel may answer at once (onToolDone erases from calls_): collected first. The calls
  // themselves live on in the graveyard until the next loop turn.
  std::vector<RunningCall*> ending;
  for (auto& [k, c] : calls_) {
    if (c.session_id == id && c.call) ending.push_back(c.call.get());
  }
  for (RunningCall* c : ending) c->cancel();
  if (it->second.writes) it->second.writes->end(text.c_str());  // rolled back, never committed
  sessions_.erase(it);
}

std::optional<Json> McpServer::admit(Exchange& ex, const Json& id, const std::string& principal) {
  std::vector<SessionSlot> slots;
  slots.reserve(sessions_.size());
  for (const auto& [sid, s] : sessions_) {
    // Never ended to make room: a session running a call, or holding a write transaction.
    const bool txn = s.writes && s.writes->state() != session::TxnState::kNone;
    slots.push_back(SessionSlot{sid, s.principal, s.last_used_ms, s.in_flight == 0 && !txn});
  }
  const auto total = static_cast<size_t>(config_.max_sessions);
  const auto own =
      static_cast<size_t>(std::min(config_.max_sessions_per_principal, config_.max_sessions));
  const Admission a = admitSession(principal, slots, total, own);
  switch (a.kind) {
    case Admission::Kind::kAdmit:
      return std::nullopt;
    case Admission::Kind::kEvict:
      ++counters_.sessions_expired;
      endSession(a.victim, a.why, true);
      return std::nullopt;
    case Admission::Kind::kRefuseOwnCap:
      ex.status = 429;
      spdlog::warn("mcp: refused a new session: its caller holds {} sessions, each busy", own);
      return rpcError(
          id, kServerBusy,
          "too many sessions for this caller (mcp.max_sessions_per_principal = " +
              std::to_string(own) +
              "), each running a call or holding a write transaction; end one you no longer need "
              "(DELETE with its Mcp-Session-Id, after commit or rollback), then initialize again");
    case Admission::Kind::kRefuseGlobalCap:
      ex.status = 503;
      spdlog::warn("mcp: refused a new session: {} sessions (mcp.max_sessions), none can make room",
                   total);
      return rpcError(
          id, kServerBusy,
          "pgwarden holds its most MCP sessions (mcp.max_sessions = " + std::to_string(total) +
              ") and none can be ended to make room; try initialize again in a few seconds");
  }
  return std::nullopt;
}

void McpServer::expireSessions() {
  const uint64_t now = uv_now(loop_);
  const auto idle = static_cast<uint64_t>(config_.session_idle_timeout.count());
  const uint64_t warn_before = std::min(kExpiryWarningMs, idle / 2);
  std::vector<std::string> expired;
  for (auto& [id, s] : sessions_) {
    if (s.writes) s.writes->tick(now);
    if (s.in_flight != 0) continue;
    if (now - s.last_used_ms >= idle) {
      expired.push_back(id);
    } else if (now - s.last_used_ms >= idle - warn_before && s.expiry_warned_at != s.last_used_ms) {
      s.expiry_warned_at = s.last_used_ms;
      const uint64_t left_s = (idle - (now - s.last_used_ms) + 999) / 1000;
      tell(s, LogLevel::kWarning, "session_expiring",
           "this session expires in " + std::to_string(left_s) + " s unless a request uses it",
           {{"expires_in_s", left_s}});
    }
  }
  for (const auto& id : expired) {
    ++counters_.sessions_expired;
    endSession(id, SessionEnd::kIdle, true);
  }
}

}  // namespace pgwarden::mcp
