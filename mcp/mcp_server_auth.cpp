// McpServer: who a request comes from. A static bearer token (its hash in mcp.tokens), an OAuth
// access token (a JWT of mcp.oauth's issuer, mcp/oauth_token.h), or the opted-in loopback trust;
// the challenges that tell a client how to get a token; the RFC 9728 metadata document.
#include <spdlog/spdlog.h>

#include <chrono>

#include "common/log_text.h"
#include "mcp/jwks_fetcher.h"
#include "mcp/mcp_server.h"
#include "mcp/oauth_resource.h"
#include "mcp/oauth_token.h"
#include "mcp/token_auth.h"

namespace pgwarden::mcp {

std::string McpServer::challenge(std::string_view error) const {
  if (config_.oauth.enabled()) return bearerChallenge(config_.oauth, error, {}, error.empty());
  return error.empty() ? "Bearer" : "Bearer error=\"" + std::string(error) + "\"";
}

std::optional<McpServer::Caller> McpServer::authenticate(uint64_t exchange,
                                                         const HttpRequest& req) {
  const std::string_view authz = req.header("authorization");
  if (authz.empty()) {
    // The loopback-trusted caller presents no credential, so no one's failures can lock it out.
    if (!config_.trust_loopback.empty() && req.loopback)
      return Caller{config_.trust_loopback, "loopback", {}};
    ++counters_.unauthorized;
    respondPlain(exchange, 401, "a bearer token is required",
                 {{"WWW-Authenticate", challenge({})}});
    return std::nullopt;
  }
  auto token = bearerToken(authz);
  // Failures count against what was presented (its hash, never the token) from this address: a
  // client retrying a wrong token is refused, the right tokens from the same address are not.
  const std::string digest = toHex(sha256(token ? *token : authz));
  const std::string credential = session::AuthLimiter::tokenCredential(digest);
  switch (host_.loginBlocked(req.peer_host, credential)) {
    case session::AuthLimiter::Block::kNone:
      break;
    case session::AuthLimiter::Block::kCredential:
      respondPlain(exchange, 429,
                   "too many failed attempts with this token from this address; check the token "
                   "(pgwarden token USER makes a new one) or try again in a minute",
                   {{"Retry-After", "60"}});
      return std::nullopt;
    case session::AuthLimiter::Block::kAddress:
      respondPlain(exchange, 429,
                   "too many failed attempts from this address; try again in a minute",
                   {{"Retry-After", "60"}});
      return std::nullopt;
  }
  std::optional<std::string> user;
  if (token) user = userForToken(config_.tokens, *token);
  if (!user && token && config_.oauth.enabled() && looksLikeJwt(*token)) {
    return authenticateOAuth(exchange, req, *token, credential);
  }
  if (!user) {
    ++counters_.unauthorized;
    host_.loginFailed(req.peer_host, credential);
    spdlog::warn("mcp: rejected a request from {}: invalid bearer token", logsafe(req.peer_host));
    respondPlain(exchange, 401, "invalid token",
                 {{"WWW-Authenticate", challenge("invalid_token")}});
    return std::nullopt;
  }
  return Caller{std::move(*user), "token:" + digest.substr(0, 16), {}};
}

std::optional<McpServer::Caller> McpServer::authenticateOAuth(uint64_t exchange,
                                                              const HttpRequest& req,
                                                              std::string_view token,
                                                              const std::string& credential) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (jwks_fetcher_) config_.oauth.keys = jwks_fetcher_->keys();
  TokenCheck check = checkAccessToken(config_.oauth, token, now);
  if (check.unknown_key && jwks_fetcher_) jwks_fetcher_->refreshSoon();
  switch (check.verdict) {
    case TokenVerdict::kValid:
      // A subject's sessions count against it, whichever of its tokens opened them.
      return Caller{check.user, "oauth:" + check.user, std::move(check.group)};
    case TokenVerdict::kInsufficientScope:
      // A real token of the issuer, short of a scope: no failed login, a step-up.
      ++counters_.unauthorized;
      spdlog::warn("mcp: refused a request from {}: {}", logsafe(req.peer_host), check.reason);
      respondPlain(exchange, 403, "insufficient scope: " + check.reason,
                   {{"WWW-Authenticate",
                     bearerChallenge(config_.oauth, "insufficient_scope", check.reason, true)}});
      return std::nullopt;
    case TokenVerdict::kInvalid:
      break;
  }
  ++counters_.unauthorized;
  host_.loginFailed(req.peer_host, credential);
  spdlog::warn("mcp: rejected a request from {}: invalid access token: {}", logsafe(req.peer_host),
               check.reason);
  respondPlain(
      exchange, 401, "invalid token: " + check.reason,
      {{"WWW-Authenticate", bearerChallenge(config_.oauth, "invalid_token", check.reason, false)}});
  return std::nullopt;
}

bool McpServer::serveResourceMetadata(uint64_t exchange, const HttpRequest& req) {
  if (!config_.oauth.enabled() || !isResourceMetadataPath(config_.oauth, config_.path, req.path)) {
    return false;
  }
  // Public by design (RFC 9728): a client reads it before it has a token.
  if (req.method != "GET") {
    respondPlain(exchange, 405, "method not allowed", {{"Allow", "GET"}});
  } else {
    respondJson(exchange, 200, protectedResourceMetadata(config_.oauth), false,
                {{"Cache-Control", "max-age=300"}});
  }
  return true;
}

void McpServer::followJwksUrl() {
  const std::string& url = config_.oauth.jwks_url;
  if (jwks_fetcher_ && jwks_fetcher_->url() == url) return;
  jwks_fetcher_.reset();  // a fetch under way is aborted
  if (url.empty()) return;
  jwks_fetcher_ = std::make_unique<JwksFetcher>(url, config_.oauth.jwks_refresh);
  jwks_fetcher_->start();
}

std::optional<McpIdentity> McpServer::identify(const Caller& caller) {
  if (caller.group.empty()) return host_.identify(caller.user);
  return host_.identifyInGroup(caller.user, caller.group);
}

}  // namespace pgwarden::mcp
