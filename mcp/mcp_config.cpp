#include "mcp/mcp_config.h"

#include <sys/stat.h>

#include <cstdio>

#include "common/config_util.h"
#include "mcp/oauth_config.h"
#include "mcp/token_auth.h"

namespace pgwarden::mcp {

namespace cfg = pgwarden::config;

config::McpConfig parseMcpConfig(const YAML::Node& n, const std::string& config_path) {
  config::McpConfig out;
  if (!n.IsDefined() || n.IsNull()) return out;
  cfg::requireMap(n, "mcp");
  cfg::checkKeys(n, "mcp",
                 {"listen", "path", "tls", "tokens", "trust_loopback", "database",
                  "allowed_origins", "max_body_bytes", "max_connections", "max_sessions",
                  "max_sessions_per_principal", "max_requests_per_session", "read_timeout",
                  "keepalive_timeout", "session_idle_timeout", "max_rows", "max_result_bytes",
                  "handle_key_file", "oauth"});
  out.listen = cfg::getString(n, "mcp", "listen", "");
  out.path = cfg::getString(n, "mcp", "path", out.path);
  if (out.path.empty() || out.path.front() != '/' ||
      out.path.find_first_of("?# \t") != std::string::npos) {
    cfg::fail(n["path"], "mcp.path", "must start with '/' and hold no query, fragment or space");
  }
  out.tls = cfg::getBool(n, "mcp", "tls", false);
  if (const YAML::Node t = n["tokens"]; t.IsDefined() && !t.IsNull()) {
    cfg::requireSequence(t, "mcp.tokens");
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string path = "mcp.tokens[" + std::to_string(i) + "]";
      const YAML::Node e = t[i];
      cfg::requireMap(e, path);
      cfg::checkKeys(e, path, {"user", "sha256"});
      config::McpToken tok;
      tok.user = cfg::getString(e, path, "user", "");
      if (tok.user.empty()) cfg::fail(e, path + ".user", "a token needs the user it runs as");
      const std::string hex = cfg::getString(e, path, "sha256", "");
      auto digest = parseSha256Hex(hex);
      if (!digest) {
        cfg::fail(e["sha256"].IsDefined() ? e["sha256"] : e, path + ".sha256",
                  "must be the 64 hex digits of the token's SHA-256 (pgwarden token USER prints it)");
      }
      tok.sha256 = *digest;
      tok.line = cfg::lineOf(e);
      out.tokens.push_back(std::move(tok));
    }
  }
  out.oauth = parseOAuthConfig(n["oauth"], config_path);
  out.trust_loopback = cfg::getString(n, "mcp", "trust_loopback", "");
  if (n["trust_loopback"].IsDefined()) out.trust_loopback_line = cfg::lineOf(n["trust_loopback"]);
  out.database = cfg::getString(n, "mcp", "database", out.database);
  if (out.database.empty()) cfg::fail(n["database"], "mcp.database", "must not be empty");
  out.allowed_origins = cfg::getStringList(n, "mcp", "allowed_origins");
  out.handle_key_file = cfg::getString(n, "mcp", "handle_key_file", "");
  if (n["handle_key_file"].IsDefined() && out.handle_key_file.empty()) {
    cfg::fail(n["handle_key_file"], "mcp.handle_key_file", "must not be empty");
  }
  out.max_body_bytes = cfg::getSize(n, "mcp", "max_body_bytes", out.max_body_bytes);
  if (out.max_body_bytes < 1024 || out.max_body_bytes > (64u << 20)) {
    cfg::fail(n["max_body_bytes"], "mcp.max_body_bytes", "must be between 1KiB and 64MiB");
  }
  out.max_connections = static_cast<int>(cfg::getInt(n, "mcp", "max_connections", out.max_connections, 1, 100000));
  out.max_sessions = static_cast<int>(cfg::getInt(n, "mcp", "max_sessions", out.max_sessions, 1, 100000));
  out.max_sessions_per_principal = static_cast<int>(cfg::getInt(
      n, "mcp", "max_sessions_per_principal", out.max_sessions_per_principal, 1, 100000));
  out.max_requests_per_session = static_cast<int>(
      cfg::getInt(n, "mcp", "max_requests_per_session", out.max_requests_per_session, 1, 1000));
  out.read_timeout = cfg::getDuration(n, "mcp", "read_timeout", out.read_timeout);
  out.keepalive_timeout = cfg::getDuration(n, "mcp", "keepalive_timeout", out.keepalive_timeout);
  out.session_idle_timeout = cfg::getDuration(n, "mcp", "session_idle_timeout", out.session_idle_timeout);
  if (out.read_timeout.count() <= 0) cfg::fail(n["read_timeout"], "mcp.read_timeout", "must be positive");
  if (out.keepalive_timeout.count() <= 0) {
    cfg::fail(n["keepalive_timeout"], "mcp.keepalive_timeout", "must be positive");
  }
  if (out.session_idle_timeout.count() <= 0) {
    cfg::fail(n["session_idle_timeout"], "mcp.session_idle_timeout", "must be positive");
  }
  out.max_rows = cfg::getInt(n, "mcp", "max_rows", out.max_rows, 1, 1000000);
  out.max_result_bytes = cfg::getSize(n, "mcp", "max_result_bytes", out.max_result_bytes);
  if (out.max_result_bytes < 1024) cfg::fail(n["max_result_bytes"], "mcp.max_result_bytes", "must be at least 1KiB");
  if (out.enabled() && out.tokens.empty() && out.trust_loopback.empty() && !out.oauth.enabled()) {
    cfg::fail(
        n, "mcp.tokens",
        "mcp.listen is set but no one can connect: add tokens (pgwarden token USER), oauth or "
        "trust_loopback");
  }
  return out;
}

void loadHandleKey(const YAML::Node& node, const std::string& file, config::McpConfig& out,
                   std::vector<std::string>& warnings) {
  out.handle_key_file = file;
  auto bytes = cfg::readSmallFile(file, kMaxHandleKeyBytes);
  if (!bytes) cfg::fail(node, "mcp.handle_key_file", bytes.error());
  if (bytes->size() < kMinHandleKeyBytes) {
    cfg::fail(node, "mcp.handle_key_file",
              file + " holds " + std::to_string(bytes->size()) + " bytes; the key needs at least " +
                  std::to_string(kMinHandleKeyBytes) +
                  " random bytes (head -c 32 /dev/urandom > FILE)");
  }
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    warnings.push_back("mcp.handle_key_file: " + file + " is readable by others (mode " + mode +
                       "); whoever reads it can sign transaction handles every instance "
                       "sharing it accepts: chmod 600 it");
  }
  out.handle_key = std::move(*bytes);
}

}  // namespace pgwarden::mcp
