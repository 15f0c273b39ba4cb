// Bearer tokens of the MCP endpoint: made by `pgwarden token USER`, kept in the config only as
// SHA-256 hashes, and checked in constant time against every configured hash.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/mcp_section.h"

namespace pgwarden::mcp {

using Sha256 = std::array<unsigned char, 32>;

Sha256 sha256(std::string_view data);
std::string toHex(const Sha256& digest);
// 64 hex digits (either case) -> digest; nullopt otherwise.
std::optional<Sha256> parseSha256Hex(std::string_view hex);
// A new random token ("pgw_" and 43 base64url characters: 256 bits).
std::string generateToken();
// The token of an `Authorization: Bearer <token>` value; nullopt for another scheme or none.
std::optional<std::string_view> bearerToken(std::string_view authorization);
// The user whose configured hash matches `token`. Every hash is compared, each in constant time.
std::optional<std::string> userForToken(const std::vector<config::McpToken>& tokens,
                                        std::string_view token);

}  // namespace pgwarden::mcp
