// The `mcp:` section's parser (the struct it fills is config/mcp_section.h's). Parsed once at
// load, strictly (unknown keys are errors with line and dotted key).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "config/mcp_section.h"

namespace pgwarden::mcp {

// Parses `mcp:` (an absent node: the defaults, endpoint off). Throws config::ConfigError.
config::McpConfig parseMcpConfig(const YAML::Node& node, const std::string& config_path = "");

inline constexpr size_t kMinHandleKeyBytes = 32;
inline constexpr size_t kMaxHandleKeyBytes = 4096;

// Reads mcp.handle_key_file (`file`, already resolved; `node` is its config entry) into
// out.handle_key: the whole file is the key, at least kMinHandleKeyBytes. A file others may read
// adds a warning. Throws config::ConfigError when it cannot be read or is too short.
void loadHandleKey(const YAML::Node& node, const std::string& file, config::McpConfig& out,
                   std::vector<std::string>& warnings);

}  // namespace pgwarden::mcp
