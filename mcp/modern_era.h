// The 2026-07-28 ("modern") revision of MCP next to the 2025 ones: a request carries its protocol
// version, client and capabilities in `_meta` and is served without a session; HTTP headers mirror
// the method, the tool name and the version and must match the body. Pure functions: which era a
// request is of, the checks of a modern request, and the shapes of its results and errors.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mcp/jsonrpc.h"

namespace pgwarden::mcp {

// The modern revision served (the legacy ones are request_checks.h's kProtocolVersions).
inline constexpr const char* kModernProtocolVersion = "2026-07-28";
inline constexpr const char* kMetaProtocolVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kMetaClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* kMetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kMetaServerInfo = "io.modelcontextprotocol/serverInfo";

// Error codes the 2026-07-28 revision defines (-32020 and on are MCP's own).
inline constexpr int kHeaderMismatch = -32020;
inline constexpr int kUnsupportedProtocolVersion = -32022;

// How long a client may keep tools/list and server/discover answers (they change only on a reload).
inline constexpr int64_t kListTtlMs = 60000;

bool modernProtocolVersion(std::string_view v);
// Every version served, newest first: the `supported` list of UnsupportedProtocolVersionError.
Json supportedVersions();
Json unsupportedVersionError(const Json& id, std::string_view requested);

// Whether a POST is of the modern era: its MCP-Protocol-Version header names the modern revision,
// or (no session header) its body's `_meta` names a protocol version. `initialize` never is.
bool looksModern(std::string_view header_version, bool has_session_header, std::string_view body);

// What a modern request says about its caller, from `params._meta`.
struct ModernMeta {
  std::string protocol_version;
  std::string client_name;
  std::string client_version;
};

// The headers a modern POST carries, as sent (Mcp-Name possibly base64-sentinel-encoded).
struct ModernHeaders {
  std::string_view protocol_version;
  std::string_view method;
  std::optional<std::string_view> name;
};

// A refusal: the HTTP status and the JSON-RPC error to answer with.
struct ModernRefusal {
  int status = 400;
  Json body;
};

// Checks one modern request against its headers (2026-07-28 basic/transports "Server Validation"
// and basic/versioning): the version served, the headers present and equal to the body, the
// `_meta` fields required. The caller's meta, or the refusal.
[[nodiscard]] std::optional<ModernRefusal> checkModernRequest(const RpcMessage& m,
                                                              const ModernHeaders& h,
                                                              ModernMeta& meta);

// A header value with the `=?base64?...?=` sentinel decoded; nullopt when the encoding is broken.
std::optional<std::string> decodeHeaderValue(std::string_view value);

// A modern result: `resultType` and the server's identity in `_meta` added.
Json modernResult(Json result, std::string_view server_version);
// A cacheable one (tools/list, server/discover): `ttlMs` and `cacheScope` too.
Json cacheableResult(Json result, int64_t ttl_ms, std::string_view scope);

}  // namespace pgwarden::mcp
