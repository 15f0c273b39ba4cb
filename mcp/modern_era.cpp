// The 2026-07-28 revision's request checks and result shapes (basic/transports/streamable-http
// "Request Metadata" and "Server Validation", basic/versioning, server/utilities/caching).
#include "mcp/modern_era.h"

#include <openssl/evp.h>

#include "mcp/request_checks.h"

namespace pgwarden::mcp {

namespace {

constexpr std::string_view kSentinelOpen = "=?base64?";
constexpr std::string_view kSentinelClose = "?=";

ModernRefusal mismatch(const Json& id, std::string message) {
  return {400, rpcError(id, kHeaderMismatch, "Header mismatch: " + message)};
}

// The header value names what the body says (after decoding), or the refusal saying which.
std::optional<ModernRefusal> sameAs(const Json& id, std::string_view header,
                                    std::optional<std::string_view> value,
                                    const std::string& body) {
  if (!value || value->empty()) return mismatch(id, std::string(header) + " header is required");
  const auto decoded = decodeHeaderValue(*value);
  if (!decoded) return mismatch(id, std::string(header) + " header is not validly encoded");
  if (*decoded != body) {
    return mismatch(id, std::string(header) + " header value '" + decoded->substr(0, 100) +
                            "' does not match body value '" + body.substr(0, 100) + "'");
  }
  return std::nullopt;
}

}  // namespace

bool modernProtocolVersion(std::string_view v) { return v == kModernProtocolVersion; }

Json supportedVersions() {
  Json out = Json::array({kModernProtocolVersion});
  for (auto it = std::rbegin(kProtocolVersions); it != std::rend(kProtocolVersions); ++it)
    out.push_back(*it);
  return out;
}

Json unsupportedVersionError(const Json& id, std::string_view requested) {
  return rpcError(
      id, kUnsupportedProtocolVersion, "Unsupported protocol version",
      {{"supported", supportedVersions()}, {"requested", std::string(requested.substr(0, 64))}});
}

bool looksModern(std::string_view header_version, bool has_session_header, std::string_view body) {
  if (modernProtocolVersion(header_version)) return true;
  // A cheap look first: a legacy session's requests never carry the modern `_meta` key.
  if (has_session_header || body.find(kMetaProtocolVersion) == std::string_view::npos) return false;
  if (!jsonDepthWithin(body, kMaxJsonDepth)) return false;
  const Json j = Json::parse(body, nullptr, false);
  if (!j.is_object() || j.value("method", std::string()) == "initialize") return false;
  const auto params = j.find("params");
  if (params == j.end() || !params->is_object()) return false;
  const auto meta = params->find("_meta");
  return meta != params->end() && meta->is_object() && meta->contains(kMetaProtocolVersion);
}

std::optional<ModernRefusal> checkModernRequest(const RpcMessage& m, const ModernHeaders& h,
                                                ModernMeta& meta) {
  const Json* m_meta = nullptr;
  if (m.params.is_object()) {
    const auto it = m.params.find("_meta");
    if (it != m.params.end() && it->is_object()) m_meta = &*it;
  }
  const auto field = [m_meta](const char* key) -> const Json* {
    if (!m_meta) return nullptr;
    const auto it = m_meta->find(key);
    return it == m_meta->end() ? nullptr : &*it;
  };
  const Json* version = field(kMetaProtocolVersion);
  // An unserved version is named as such whether the header or the body asks for it.
  if (!h.protocol_version.empty() && !modernProtocolVersion(h.protocol_version) &&
      !supportedProtocolVersion(h.protocol_version)) {
    return ModernRefusal{400, unsupportedVersionError(m.id, h.protocol_version)};
  }
  // A body without its version is missing a required field (-32602), whatever the header says.
  if (!version || !version->is_string()) {
    return ModernRefusal{400, rpcError(m.id, kInvalidParams,
                                       std::string("Invalid params: params._meta[\"") +
                                           kMetaProtocolVersion + "\"] is required")};
  }
  meta.protocol_version = version->get<std::string>();
  const std::string& v = meta.protocol_version;
  const bool unserved = !modernProtocolVersion(v) && !supportedProtocolVersion(v);
  // A header that differs from the body is a mismatch even when the body's version is one not
  // served (the header's was checked above); without the header, the version is named first.
  if (!h.protocol_version.empty() || !unserved) {
    if (auto r = sameAs(m.id, "MCP-Protocol-Version", h.protocol_version, v)) return r;
  }
  if (unserved) return ModernRefusal{400, unsupportedVersionError(m.id, v)};
  if (!modernProtocolVersion(v)) {
    return ModernRefusal{400, rpcError(m.id, kInvalidRequest,
                                       "Invalid Request: protocol version " + v +
                                           " is served only after initialize; send " +
                                           kModernProtocolVersion + " requests without a session")};
  }
  if (auto r = sameAs(m.id, "Mcp-Method", h.method, m.method)) return r;
  if (m.method == "tools/call" || m.method == "prompts/get" || m.method == "resources/read") {
    const char* key = m.method == "resources/read" ? "uri" : "name";
    const auto v = m.params.find(key);
    if (v == m.params.end() || !v->is_string()) {
      return ModernRefusal{200, rpcError(m.id, kInvalidParams,
                                         std::string("Invalid params: ") + key + " is required")};
    }
    if (auto r = sameAs(m.id, "Mcp-Name", h.name, v->get_ref<const std::string&>())) return r;
  }
  const Json* caps = field(kMetaClientCapabilities);
  if (!caps || !caps->is_object()) {
    return ModernRefusal{
        400, rpcError(m.id, kInvalidParams,
                      std::string("Invalid params: params._meta[\"") + kMetaClientCapabilities +
                          "\"] is required (an empty object when the client has none)")};
  }
  if (const Json* ci = field(kMetaClientInfo); ci && ci->is_object()) {
    const auto name = ci->find("name");
    const auto ver = ci->find("version");
    if (name != ci->end() && name->is_string())
      meta.client_name = name->get<std::string>().substr(0, 256);
    if (ver != ci->end() && ver->is_string())
      meta.client_version = ver->get<std::string>().substr(0, 64);
  }
  return std::nullopt;
}

std::optional<std::string> decodeHeaderValue(std::string_view value) {
  if (value.size() < kSentinelOpen.size() + kSentinelClose.size() ||
      value.substr(0, kSentinelOpen.size()) != kSentinelOpen ||
      value.substr(value.size() - kSentinelClose.size()) != kSentinelClose) {
    return std::string(value);
  }
  const std::string_view b64 = value.substr(
      kSentinelOpen.size(), value.size() - kSentinelOpen.size() - kSentinelClose.size());
  if (b64.size() % 4 != 0 || b64.size() > 8192) return std::nullopt;
  std::string out(b64.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding's bytes as data.
  size_t len = static_cast<size_t>(n);
  for (size_t i = b64.size(); i > 0 && b64[i - 1] == '=' && len > 0; --i) --len;
  out.resize(len);
  return out;
}

Json modernResult(Json result, std::string_view server_version) {
  if (!result.is_object()) return result;
  result["resultType"] = "complete";
  result["_meta"][kMetaServerInfo] = {{"name", "pgwarden"},
                                      {"version", std::string(server_version)}};
  return result;
}

Json cacheableResult(Json result, int64_t ttl_ms, std::string_view scope) {
  result["ttlMs"] = ttl_ms;
  result["cacheScope"] = std::string(scope);
  return result;
}

}  // namespace pgwarden::mcp
