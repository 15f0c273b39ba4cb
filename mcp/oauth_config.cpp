#include "mcp/oauth_config.h"

#include "common/config_util.h"
#include "mcp/oauth_token.h"

namespace pgwarden::mcp {

namespace cfg = pgwarden::config;

namespace {

constexpr size_t kMaxJwksBytes = 1024 * 1024;
constexpr const char* kPath = "mcp.oauth";

bool isHttpUri(const std::string& uri) {
  return (uri.starts_with("https://") || uri.starts_with("http://")) &&
         uri.find_first_of("#? \t") == std::string::npos;
}

bool isLoopbackHttp(const std::string& url) {
  for (const char* prefix : {"http://127.0.0.1:", "http://127.0.0.1/", "http://localhost:",
                             "http://localhost/", "http://[::1]:", "http://[::1]/"}) {
    if (url.starts_with(prefix)) return true;
  }
  return false;
}

std::vector<config::McpOAuthScope> parseScopes(const YAML::Node& n) {
  std::vector<config::McpOAuthScope> out;
  const YAML::Node list = n["scopes"];
  if (!list.IsDefined() || list.IsNull() || list.size() == 0) {
    cfg::fail(n, "mcp.oauth.scopes", "list the scopes that give access, each with its group");
  }
  cfg::requireSequence(list, "mcp.oauth.scopes");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "mcp.oauth.scopes[" + std::to_string(i) + "]";
    const YAML::Node e = list[i];
    cfg::requireMap(e, path);
    cfg::checkKeys(e, path, {"scope", "group"});
    config::McpOAuthScope s;
    s.scope = cfg::getString(e, path, "scope", "");
    s.group = cfg::getString(e, path, "group", "");
    if (s.scope.empty() || s.scope.find_first_of(" \"\\") != std::string::npos) {
      cfg::fail(e, path + ".scope", "must be one scope token (no space, quote or backslash)");
    }
    if (s.group.empty()) cfg::fail(e, path + ".group", "a scope needs the group its tokens run in");
    s.line = cfg::lineOf(e);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

config::McpOAuthConfig parseOAuthConfig(const YAML::Node& n, const std::string& config_path) {
  config::McpOAuthConfig out;
  if (!n.IsDefined() || n.IsNull()) return out;
  cfg::requireMap(n, kPath);
  cfg::checkKeys(n, kPath,
                 {"issuer", "audience", "authorization_servers", "jwks_file", "jwks_url",
                  "jwks_refresh", "algorithms", "clock_skew", "user_claim", "scopes"});
  out.issuer = cfg::getString(n, kPath, "issuer", "");
  if (out.issuer.empty())
    cfg::fail(n, "mcp.oauth.issuer", "the issuer whose tokens are accepted is required");
  out.audience = cfg::getString(n, kPath, "audience", "");
  if (!isHttpUri(out.audience)) {
    cfg::fail(n["audience"].IsDefined() ? n["audience"] : n, "mcp.oauth.audience",
              "must be this endpoint's resource URI (https://host/path, no query or fragment)");
  }
  out.authorization_servers = cfg::getStringList(n, kPath, "authorization_servers");
  if (out.authorization_servers.empty()) out.authorization_servers.push_back(out.issuer);
  // Relative to the config file's folder, as every file the config names.
  out.jwks_file = cfg::resolveRelative(config_path, cfg::getString(n, kPath, "jwks_file", ""));
  out.jwks_url = cfg::getString(n, kPath, "jwks_url", "");
  if (out.jwks_file.empty() == out.jwks_url.empty()) {
    cfg::fail(n, "mcp.oauth.jwks_file",
              "set either jwks_file or jwks_url (the issuer's JWKS), not both");
  }
  if (!out.jwks_url.empty()) {
    if (!out.jwks_url.starts_with("https://") && !isLoopbackHttp(out.jwks_url)) {
      cfg::fail(n["jwks_url"], "mcp.oauth.jwks_url",
                "must be https:// (http:// only to localhost)");
    }
    out.jwks_refresh = cfg::getDuration(n, kPath, "jwks_refresh", out.jwks_refresh);
    if (out.jwks_refresh < std::chrono::seconds(10) || out.jwks_refresh > std::chrono::hours(24)) {
      cfg::fail(n["jwks_refresh"], "mcp.oauth.jwks_refresh", "must be between 10s and 24h");
    }
  } else {
    auto text = cfg::readSmallFile(out.jwks_file, kMaxJwksBytes);
    if (!text) cfg::fail(n["jwks_file"], "mcp.oauth.jwks_file", text.error());
    auto keys = JwkSet::parse(*text);
    if (!keys) cfg::fail(n["jwks_file"], "mcp.oauth.jwks_file", out.jwks_file + " " + keys.error());
    out.keys = std::move(*keys);
  }
  if (n["algorithms"].IsDefined()) {
    out.algorithms = cfg::getStringList(n, kPath, "algorithms");
    if (out.algorithms.empty())
      cfg::fail(n["algorithms"], "mcp.oauth.algorithms", "must name at least one");
    for (const auto& alg : out.algorithms) {
      if (!supportedAlgorithm(alg)) {
        cfg::fail(n["algorithms"], "mcp.oauth.algorithms",
                  "\"" + alg +
                      "\" is not accepted: RS256/384/512, PS256/384/512 or ES256/384/512 " +
                      "(never none or an HMAC)");
      }
    }
  }
  out.clock_skew = cfg::getDuration(n, kPath, "clock_skew", out.clock_skew);
  if (out.clock_skew.count() < 0 || out.clock_skew > std::chrono::minutes(10)) {
    cfg::fail(n["clock_skew"], "mcp.oauth.clock_skew", "must be between 0 and 10m");
  }
  out.user_claim = cfg::getString(n, kPath, "user_claim", out.user_claim);
  if (out.user_claim.empty())
    cfg::fail(n["user_claim"], "mcp.oauth.user_claim", "must not be empty");
  out.scopes = parseScopes(n);
  return out;
}

}  // namespace pgwarden::mcp
