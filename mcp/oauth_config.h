// The `mcp.oauth:` section's parser: the issuer, this server's resource URI (the audience), the
// issuer's keys (a JWKS file, read here at load and at each reload), the accepted algorithms, the
// clock skew, the claim naming the user and the scope-to-group map.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "config/mcp_section.h"

namespace pgwarden::mcp {

// Parses `mcp.oauth` (absent: OAuth off). Throws config::ConfigError. The groups the scopes map
// to are checked against the groups by the config loader.
config::McpOAuthConfig parseOAuthConfig(const YAML::Node& node,
                                        const std::string& config_path = "");

}  // namespace pgwarden::mcp
