#include "mcp/oauth_resource.h"

#include <algorithm>

namespace pgwarden::mcp {

namespace {

// "scheme://authority" and the path (possibly empty) of a URI.
std::pair<std::string_view, std::string_view> splitUri(std::string_view uri) {
  const size_t scheme = uri.find("://");
  const size_t slash =
      scheme == std::string_view::npos ? std::string_view::npos : uri.find('/', scheme + 3);
  if (slash == std::string_view::npos) return {uri, {}};
  std::string_view path = uri.substr(slash);
  if (path == "/") path = {};
  return {uri.substr(0, slash), path};
}

// A quoted-string's content: no quote or backslash, printable ASCII only.
std::string quotable(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\' || c < 0x20 || c > 0x7e) continue;
    out.push_back(c);
  }
  return out;
}

}  // namespace

Json protectedResourceMetadata(const config::McpOAuthConfig& oauth) {
  Json scopes = Json::array();
  for (const auto& s : oauth.scopes) {
    if (std::find(scopes.begin(), scopes.end(), s.scope) == scopes.end()) scopes.push_back(s.scope);
  }
  return Json{{"resource", oauth.audience},
              {"authorization_servers", oauth.authorization_servers},
              {"scopes_supported", std::move(scopes)},
              {"bearer_methods_supported", Json::array({"header"})},
              {"resource_signing_alg_values_supported", oauth.algorithms},
              {"resource_name", "pgwarden"}};
}

std::string resourceMetadataUrl(const config::McpOAuthConfig& oauth) {
  const auto [origin, path] = splitUri(oauth.audience);
  return std::string(origin) + std::string(kResourceMetadataPath) + std::string(path);
}

bool isResourceMetadataPath(const config::McpOAuthConfig& oauth, std::string_view mcp_path,
                            std::string_view request_path) {
  if (!request_path.starts_with(kResourceMetadataPath)) return false;
  const std::string_view suffix = request_path.substr(kResourceMetadataPath.size());
  return suffix.empty() || suffix == splitUri(oauth.audience).second || suffix == mcp_path;
}

std::string scopeList(const config::McpOAuthConfig& oauth) {
  std::string out;
  const Json metadata = protectedResourceMetadata(oauth);
  for (const auto& item : metadata["scopes_supported"]) {
    if (!out.empty()) out += ' ';
    out += item.get<std::string>();
  }
  return out;
}

std::string bearerChallenge(const config::McpOAuthConfig& oauth, std::string_view error,
                            std::string_view description, bool with_scope) {
  std::string out = "Bearer resource_metadata=\"" + quotable(resourceMetadataUrl(oauth)) + "\"";
  if (!error.empty()) out += ", error=\"" + quotable(error) + "\"";
  if (!description.empty()) out += ", error_description=\"" + quotable(description) + "\"";
  if (with_scope) out += ", scope=\"" + quotable(scopeList(oauth)) + "\"";
  return out;
}

}  // namespace pgwarden::mcp
