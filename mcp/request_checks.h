// The checks a request passes before its token is looked at: the protocol versions served, and
// the Origin and Host headers (DNS-rebinding protection). Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

// Whether a listen address ("host:port") is a loopback one, where the Host check applies.
bool isLoopbackListen(std::string_view listen);

}  // namespace pgwarden::mcp
