// JSON-RPC 2.0 as MCP uses it: one POST body becomes a list of validated messages (a request, a
// notification or a client's response), or the error object a conforming client expects.
// Pure functions, no I/O: the HTTP transport and the session layer sit above.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::mcp {

using Json = nlohmann::json;

// JSON-RPC error codes (and MCP's use of them).
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
inline constexpr int kRequestCancelled = -32800;  // LSP/MCP: the request was cancelled

struct RpcMessage {
  enum class Kind : uint8_t { kRequest, kNotification, kResponse };
  Kind kind = Kind::kRequest;
  Json id;             // requests and responses: a string or an integer
  std::string method;  // requests and notifications
  Json params;         // an object, or null when absent
};

struct RpcParse {
  bool batch = false;
  std::vector<RpcMessage> messages;
  // Messages that were not valid JSON-RPC: their error responses, in order (id null when the
  // message had no usable id). With a parse error this holds the one response and nothing else.
  std::vector<Json> errors;
};

// Bodies nested deeper than this are refused as parse errors before any parser sees them.
inline constexpr int kMaxJsonDepth = 64;

// Parses a POST body. `allow_batch`: the negotiated version allows arrays of messages.
RpcParse parseRpcBody(std::string_view body, bool allow_batch);

// True when `text` nests arrays/objects no deeper than `max_depth` (strings are skipped).
bool jsonDepthWithin(std::string_view text, int max_depth);

Json rpcResult(const Json& id, Json result);
Json rpcError(const Json& id, int code, std::string_view message, const Json& data = nullptr);

// Serialises for the wire: invalid UTF-8 from the database is replaced, never thrown on.
std::string dumpJson(const Json& j);

}  // namespace pgwarden::mcp
