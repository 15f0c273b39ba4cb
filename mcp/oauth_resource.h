// What the MCP endpoint tells OAuth clients about itself: the RFC 9728 protected-resource
// metadata (which authorization servers issue its tokens, which scopes it knows) and the
// `WWW-Authenticate: Bearer` challenges that point to it (RFC 6750, with `resource_metadata`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/mcp_section.h"
#include "mcp/jsonrpc.h"

namespace pgwarden::mcp {

inline constexpr std::string_view kResourceMetadataPath = "/.well-known/oauth-protected-resource";

// The metadata document (RFC 9728 section 2).
Json protectedResourceMetadata(const config::McpOAuthConfig& oauth);
// Where the metadata is, from the audience (the resource URI): the well-known path inserted
// between its host and its path, as RFC 9728 section 3.1 builds it.
std::string resourceMetadataUrl(const config::McpOAuthConfig& oauth);
// The request paths that serve the metadata: the bare well-known path, and the path-suffixed
// forms for the resource URI's path and for the endpoint's own `mcp_path`.
bool isResourceMetadataPath(const config::McpOAuthConfig& oauth, std::string_view mcp_path,
                            std::string_view request_path);
// The configured scopes, space-separated, each once (the challenge's `scope`).
std::string scopeList(const config::McpOAuthConfig& oauth);
// `Bearer resource_metadata="…"`, with `error` and `error_description` when a token was given
// and wrong, and `scope` for a token that lacks one (or none given).
std::string bearerChallenge(const config::McpOAuthConfig& oauth, std::string_view error,
                            std::string_view description, bool with_scope);

}  // namespace pgwarden::mcp
