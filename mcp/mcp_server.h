// The MCP endpoint: Streamable HTTP (POST with JSON-RPC, GET for a session's server-to-client
// stream, DELETE to end a session) on its own listener. Per request: the path, the Origin and Host
// checks (DNS-rebinding protection), the bearer token or the opted-in loopback trust, the session
// (Mcp-Session-Id) and the negotiated protocol version, then each JSON-RPC message (initialize,
// ping, tools/list, tools/call, logging/setLevel, notifications/initialized and cancelled).
// Sessions, streams, the requests in flight per session and the HTTP clients are all capped; idle
// sessions expire; a shutdown lets the calls in flight finish first.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "config/mcp_section.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp_host.h"
#include "mcp/operator_call.h"
#include "mcp/operator_tools.h"
#include "mcp/request_checks.h"
#include "mcp/session_admission.h"
#include "mcp/session_streams.h"
#include "mcp/tool_calls.h"
#include "mcp/txn_handle.h"
#include "mcp/write_tools.h"
#include "net/http_transport.h"
#include "pool/next_turn.h"

namespace pgwarden::mcp {

class JwksFetcher;  // mcp/jwks_fetcher.h

// The HTTP layer is net/'s, shared with the metrics endpoint.
using net::HttpHandler;
using net::HttpRequest;
using net::HttpResponse;
using net::HttpTransport;
using net::HttpTransportOptions;

// How tool calls end, for metrics.
inline constexpr const char* kCallOutcomes[] = {"ok", "denied", "error", "cancelled"};
inline constexpr size_t kToolCount = 11;

struct McpCounters {
  uint64_t http_requests = 0;
  uint64_t unauthorized = 0;
  uint64_t forbidden_origin = 0;
  uint64_t sessions_started = 0;
  uint64_t sessions_expired = 0;
  uint64_t tool_calls[kToolCount][std::size(kCallOutcomes)] = {};  // by Tool, then outcome
  // Operator-defined tools by name (bounded by the config), then outcome.
  std::map<std::string, std::array<uint64_t, std::size(kCallOutcomes)>, std::less<>> operator_tool_calls;
};

class McpServer final : public HttpHandler {
 public:
  // `tls`: serve HTTPS with this context (mcp.tls), or null for plain HTTP.
  McpServer(uv_loop_t* loop, McpHost& host, config::McpConfig config, std::string version,
            std::shared_ptr<const net::TlsContext> tls = nullptr);
  ~McpServer();
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  [[nodiscard]] Status start();
  // Cancels every call, ends every session and stream, and closes the listener.
  void close();
  // Shutdown, first step: streams are told, new requests get 503, calls in flight go on. The
  // owner calls close() once callsInFlight() is 0 or its shutdown timeout has passed.
  void beginDrain();
  int port() const { return transport_ ? transport_->port() : 0; }
  // A reload: new tokens, trust and limits apply to new requests (the listener stays).
  void setConfig(config::McpConfig config);
  size_t sessionCount() const { return sessions_.size(); }
  size_t callsInFlight() const { return calls_.size(); }
  size_t streamCount() const { return streams_.size(); }
  const McpCounters& counters() const { return counters_; }
  // What the admin console's SHOW SESSIONS lists of one session (its Mcp-Session-Id, a bearer
  // of the session, is left out: history_id names it, as in query history).
  struct SessionView {
    uint64_t history_id = 0;
    std::string user;
    std::string group;
    std::string database;
    std::string client_name;
    std::string client_version;
    std::string protocol_version;
    std::string peer_host;
    uint64_t idle_ms = 0;
    int in_flight = 0;
    bool initialized = false;
  };
  std::vector<SessionView> sessionViews() const;

  // HttpHandler
  void onHttpRequest(uint64_t exchange, HttpRequest&& request) override;
  void onHttpAbandoned(uint64_t exchange) override;

 private:
  // Who a request comes from: the user it runs as, and the principal its sessions count against
  // (its bearer token, or the loopback-trusted caller).
  struct Caller {
    std::string user;
    std::string principal;
    std::string group;  // an OAuth access token's (its scopes'); "" for a configured user
  };
  struct Session {
    std::string id;
    McpIdentity who;
    std::string principal;
    std::string protocol_version;
    std::string client_name;
    std::string client_version;
    std::string peer_host;
    uint64_t history_id = 0;
    uint64_t last_used_ms = 0;
    int in_flight = 0;
    bool initialized = false;
    LogLevel log_level = LogLevel::kInfo;  // logging/setLevel; notifications below it are not sent
    uint64_t expiry_warned_at = 0;         // the last_used_ms the expiry warning was sent for
    std::shared_ptr<WriteConversation> writes;  // a guarded_writes group's transaction
    // A sessionless caller's write transaction (begin made the session): its handle. Such a
    // session is reached by its handle only, never by Mcp-Session-Id.
    std::string handle;
  };
  // One POST waiting for its tool calls: the answers in order, sent when the last is in.
  struct Exchange {
    uint64_t http = 0;
    bool batch = false;
    bool sse = false;
    std::vector<Json> responses;
    int outstanding = 0;
    std::string session_id;  // set on an initialize answer (the Mcp-Session-Id header)
    int status = 200;        // 429 or 503 when an initialize was refused for the session caps
    bool modern = false;     // a 2026-07-28 request: results get resultType and serverInfo
    std::string traceparent;  // the request's traceparent header (its calls' history)
  };
  struct Call {
    std::unique_ptr<RunningCall> call;
    std::string tool;        // its name, for the counters
    bool operator_tool = false;
    uint64_t exchange = 0;   // key in exchanges_
    size_t slot = 0;         // index in the exchange's responses
    std::string session_id;
    std::string rpc_id;      // the request id as JSON text (notifications/cancelled names it)
    std::string principal;   // a sessionless (2026-07-28) call: whose in-flight count it holds
  };

  void handlePost(uint64_t exchange, const HttpRequest& req, const Caller& caller);
  // A 2026-07-28 request (mcp_server_modern.cpp): served without a session.
  void handleModern(uint64_t exchange, const HttpRequest& req, const Caller& caller, bool sse);
  void startModernCall(uint64_t exchange, const HttpRequest& req, const Caller& caller, bool sse,
                       const RpcMessage& m, McpIdentity who, const std::string& client_name);
  // The write transaction a 2026-07-28 call belongs to (its transaction_handle argument, taken
  // out of `m`; begin makes one): the session it runs in, null for a one-call session, or the
  // tool result refusing the call.
  std::optional<Json> modernTransaction(RpcMessage& m, const Caller& caller, const McpIdentity& who,
                                        const std::string& client_name, const HttpRequest& req,
                                        Session** held);
  void handleDelete(uint64_t exchange, const HttpRequest& req, const std::string& user);
  void handleGet(uint64_t exchange, const HttpRequest& req, const std::string& user);
  // Answers 400 when the request names a protocol version not served.
  bool versionRejected(uint64_t exchange, const HttpRequest& req, bool sse);
  // notifications/message on the session's stream when `level` is at or above the session's.
  void tell(const Session& s, LogLevel level, std::string_view event, std::string_view message,
            Json extra = Json::object());
  // Answers one message; false when the answer comes later (a tool call in flight).
  bool handleMessage(Exchange& ex, size_t slot, Session* session, const RpcMessage& m,
                     const HttpRequest& req, const Caller& caller, Json& response);
  Json initialize(Exchange& ex, const RpcMessage& m, const HttpRequest& req, const Caller& caller);
  // Makes room for a new session of `principal` (ending the session admitSession picks), or the
  // refusal to answer with (ex.status set to 429 or 503).
  std::optional<Json> admit(Exchange& ex, const Json& id, const std::string& principal);
  bool startToolCall(Exchange& ex, size_t slot, Session& s, const RpcMessage& m, Json& response);
  Json toolsFor(const Session& s) { return toolsFor(s.who, s.writes != nullptr); }
  Json toolsFor(const McpIdentity& who, bool writes);
  const std::vector<ResultColumn>* columnsOf(const OperatorTool& tool) const;
  void onToolDone(uint64_t call_key, Json result, const char* outcome);
  void sendExchange(Exchange& ex);
  void respondJson(uint64_t exchange, int status, const Json& body, bool sse,
                   std::vector<std::pair<std::string, std::string>> headers = {});
  void respondPlain(uint64_t exchange, int status, std::string text,
                    std::vector<std::pair<std::string, std::string>> headers = {});
  // Who this request comes from, or nullopt after answering it (401, 403, 429). With
  // mcp_server_auth.cpp's helpers: a JWT access token's check, the challenges, the metadata.
  std::optional<Caller> authenticate(uint64_t exchange, const HttpRequest& req);
  std::optional<Caller> authenticateOAuth(uint64_t exchange, const HttpRequest& req,
                                          std::string_view token, const std::string& credential);
  std::string challenge(std::string_view error) const;
  // Starts, replaces or stops the JWKS fetcher as mcp.oauth.jwks_url says (start and reload).
  void followJwksUrl();
  // Answers a GET of the RFC 9728 metadata (true), or leaves the request alone (false).
  bool serveResourceMetadata(uint64_t exchange, const HttpRequest& req);
  // The identity a caller runs as: a configured user's, or an access token's subject in the
  // group its scopes map to.
  std::optional<McpIdentity> identify(const Caller& caller);
  // `tell`: the ending is pgwarden's doing (expiry, eviction), so the stream hears why first.
  // Remembered in ended_, so a later request naming the session hears why it is gone.
  void endSession(const std::string& id, SessionEnd why, bool tell_client = false);
  void expireSessions();
  void sweep();
  static void onTimer(uv_timer_t* t);
  static void onTimerClosed(uv_handle_t* h);

  uv_loop_t* loop_;
  McpHost& host_;
  config::McpConfig config_;
  std::string version_;
  std::shared_ptr<const net::TlsContext> tls_;
  bool listen_loopback_ = false;
  std::shared_ptr<HttpTransport> transport_;
  std::unordered_map<std::string, Session> sessions_;
  EndedSessions ended_;
  SessionStreams streams_;
  bool draining_ = false;
  std::unordered_map<uint64_t, Exchange> exchanges_;  // by HTTP exchange id
  std::map<uint64_t, Call> calls_;                    // by call key
  std::unordered_map<std::string, int> modern_in_flight_;  // sessionless calls by principal
  std::vector<std::unique_ptr<RunningCall>> graveyard_;  // ended calls, freed on the next turn
  // Operator tools' result columns as their first call saw them (their outputSchema), by name
  // and statement text, so a reload that changes the text forgets them.
  std::map<std::string, std::vector<ResultColumn>, std::less<>> tool_columns_;
  std::unique_ptr<pool::NextTurn> sweeper_;
  uint64_t next_call_ = 0;
  uv_timer_t* timer_ = nullptr;
  McpCounters counters_;
  HandleKey handle_key_;  // made at the first 2026-07-28 write call
  std::unique_ptr<JwksFetcher> jwks_fetcher_;  // mcp.oauth.jwks_url's
};

}  // namespace pgwarden::mcp
