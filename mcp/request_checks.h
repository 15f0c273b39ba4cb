// The checks a request passes before its token is looked at: the protocol versions served, and
// the Origin and Host headers (DNS-rebinding protection). Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mcp/jsonrpc.h"

namespace pgwarden::mcp {

// The protocol versions served, oldest first; the last is offered to a client asking for another.
inline constexpr const char* kProtocolVersions[] = {"2025-03-26", "2025-06-18", "2025-11-25"};
bool supportedProtocolVersion(std::string_view v);

// Whether an Origin header value may call the endpoint: loopback origins always, others only
// when listed in mcp.allowed_origins (exactly, scheme and port included).
bool originAllowed(std::string_view origin, const std::vector<std::string>& allowed);
// Whether a Host header names the loopback listener by a loopback name (127.0.0.1, [::1],
// localhost, with or without a port), or an allowed origin's host.
bool hostAllowed(std::string_view host, const std::vector<std::string>& allowed_origins);

// The W3C trace context of a request (https://www.w3.org/TR/trace-context/#traceparent-header):
// a request's params._meta.traceparent, else the traceparent header, when well formed
// (version-traceid-parentid-flags, lower-case hex, ids not all zero); "" otherwise.
std::string requestTraceparent(const Json& params, std::string_view header);
// A JSON-RPC id as history keeps it: its JSON text, cut to 256 bytes.
std::string historyRequestId(std::string id_json);

// Whether a listen address ("host:port") is a loopback one, where the Host check applies.
bool isLoopbackListen(std::string_view listen);

}  // namespace pgwarden::mcp
