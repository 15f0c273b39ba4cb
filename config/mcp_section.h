// The `mcp:` section: the Model Context Protocol endpoint's listener, path, bearer tokens (stored
// as SHA-256 hashes), the opt-in loopback trust, and the bounds on bodies, sessions, requests and
// results. mcp/mcp_config.h parses it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pgwarden::mcp {
// mcp/operator_tools.h
class OperatorToolSet;
// mcp/oauth_token.h
class JwkSet;
}  // namespace pgwarden::mcp

namespace pgwarden::config {

// `mcp.oauth`: the endpoint as an OAuth 2.1 resource server (docs/mcp.md, "OAuth"). Access tokens
// are JWTs signed by the issuer's keys (its JWKS), bound to this server by their audience
// (RFC 8707), and mapped to a group by their scopes.
struct McpOAuthScope {
  std::string scope;
  std::string group;
  int line = 0;
};

struct McpOAuthConfig {
  std::string issuer;    // the `iss` a token must carry
  std::string audience;  // this server's resource URI: a token's `aud` must name it
  std::vector<std::string> authorization_servers;  // the metadata's list (default: the issuer)
  // The keys' source: a file read at load (and at each reload), or a URL fetched off the loop
  // every jwks_refresh (mcp/jwks_fetcher.h); exactly one of them.
  std::string jwks_file;
  std::string jwks_url;
  std::chrono::milliseconds jwks_refresh{300000};
  std::shared_ptr<const mcp::JwkSet>
      keys;  // jwks_file's; null with jwks_url (the fetcher holds them)
  std::vector<std::string> algorithms{"RS256", "ES256"};
  std::chrono::milliseconds clock_skew{60000};
  std::string user_claim = "sub";  // the claim that names the user in history
  // In order: a token runs in the group of the first entry whose scope it holds.
  std::vector<McpOAuthScope> scopes;
  bool enabled() const { return !issuer.empty(); }
};

struct McpToken {
  std::string user;
  std::array<unsigned char, 32> sha256{};  // of the token's bytes
  int line = 0;                            // where the entry is, for messages
};

struct McpConfig {
  std::string listen;  // "host:port"; "" = the endpoint is off (the default)
  std::string path = "/mcp";
  // Serve HTTPS with the certificate and key of the `tls:` section (the SQL listener's).
  bool tls = false;
  std::vector<McpToken> tokens;
  McpOAuthConfig oauth;
  // Requests from 127.0.0.1 / ::1 without a token run as this user ("" = off).
  std::string trust_loopback;
  int trust_loopback_line = 0;
  // The client database name MCP statements run against (mapped through upstream.databases).
  std::string database = "postgres";
  // Origins accepted besides http(s)://localhost, 127.0.0.1 and [::1] on any port.
  std::vector<std::string> allowed_origins;
  uint64_t max_body_bytes = 1u << 20;
  int max_connections = 128;
  int max_sessions = 64;
  // Sessions one principal (a bearer token, or the loopback-trusted caller) may hold: its flood
  // makes room among its own sessions, never another's.
  int max_sessions_per_principal = 16;
  int max_requests_per_session = 4;  // tool calls in flight per MCP session
  std::chrono::milliseconds read_timeout{10000};     // first byte .. whole request
  std::chrono::milliseconds keepalive_timeout{60000};  // an idle HTTP connection closes
  std::chrono::milliseconds session_idle_timeout{1800000};
  int64_t max_rows = 1000;                  // a query tool's default (and largest) row count
  uint64_t max_result_bytes = 1u << 20;     // row data kept for one result
  // The `tools:` section (operator-defined tools), filled by the config loader; null: none.
  std::shared_ptr<const mcp::OperatorToolSet> tools;
  // The daemon's instance_id (filled by the config loader): write-transaction handles name it.
  std::string instance_id;
  // mcp.handle_key_file (resolved against the config's folder) and its bytes, the key that signs
  // write-transaction handles: every instance of a fleet given the same file verifies every
  // other's handles. Unset: a key made at start, known to this process only. Read at start.
  std::string handle_key_file;
  std::string handle_key;
  bool enabled() const { return !listen.empty(); }
};

}  // namespace pgwarden::config
