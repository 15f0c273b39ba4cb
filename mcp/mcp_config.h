// The `mcp:` section's parser (the struct it fills is config/mcp_section.h's). Parsed once at
// load, strictly (unknown keys are errors with line and dotted key).
#pragma once

#include <yaml-cpp/yaml.h>

#include "config/mcp_section.h"

namespace pgwarden::mcp {

// Parses `mcp:` (an absent node: the defaults, endpoint off). Throws config::ConfigError.
McpConfig parseMcpConfig(const YAML::Node& node);

}  // namespace pgwarden::mcp
