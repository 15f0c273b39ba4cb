// The checks a request passes before its token is looked at: the protocol versions served, and
// the Origin and Host headers that keep a page on another site from reaching a local endpoint.
#include "mcp/request_checks.h"

namespace pgwarden::mcp {

namespace {

// "host[:port]" of an origin or Host value, split; host lower-cased, brackets kept for IPv6.
std::string hostPart(std::string_view hostport) {
  std::string h;
  if (!hostport.empty() && hostport.front() == '[') {
    const auto close = hostport.find(']');
    h = std::string(
        hostport.substr(0, close == std::string_view::npos ? hostport.size() : close + 1));
  } else {
    h = std::string(hostport.substr(0, hostport.find(':')));
  }
  for (char& c : h) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return h;
}

// version "-" trace-id "-" parent-id "-" flags: 2, 32, 16 and 2 lower-case hex digits; version
// ff is invalid and all-zero ids mean none.
bool wellFormedTraceparent(std::string_view t) {
  if (t.size() != 55 || t[2] != '-' || t[35] != '-' || t[52] != '-') return false;
  bool trace_zero = true;
  bool parent_zero = true;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i == 2 || i == 35 || i == 52) continue;
    const char c = t[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    if (c != '0' && i > 2 && i < 35) trace_zero = false;
    if (c != '0' && i > 35 && i < 52) parent_zero = false;
  }
  return t.substr(0, 2) != "ff" && !trace_zero && !parent_zero;
}

bool loopbackName(std::string_view host) {
  return host == "localhost" || host == "127.0.0.1" || host == "[::1]";
}

}  // namespace

bool supportedProtocolVersion(std::string_view v) {
  for (const char* s : kProtocolVersions) {
    if (v == s) return true;
  }
  return false;
}

bool originAllowed(std::string_view origin, const std::vector<std::string>& allowed) {
  for (const auto& a : allowed) {
    if (origin == a) return true;
  }
  std::string_view rest;
  if (origin.rfind("http://", 0) == 0) {
    rest = origin.substr(7);
  } else if (origin.rfind("https://", 0) == 0) {
    rest = origin.substr(8);
  } else {
    return false;
  }
  if (rest.find('/') != std::string_view::npos) return false;
  return loopbackName(hostPart(rest));
}

bool hostAllowed(std::string_view host, const std::vector<std::string>& allowed_origins) {
  const std::string h = hostPart(host);
  if (loopbackName(h)) return true;
  for (const auto& a : allowed_origins) {
    const auto p = a.find("://");
    if (p != std::string::npos && hostPart(std::string_view(a).substr(p + 3)) == h) return true;
  }
  return false;
}

std::string requestTraceparent(const Json& params, std::string_view header) {
  const auto meta = params.is_object() ? params.find("_meta") : params.end();
  if (meta != params.end() && meta->is_object()) {
    const auto t = meta->find("traceparent");
    if (t != meta->end() && t->is_string() &&
        wellFormedTraceparent(t->get_ref<const std::string&>())) {
      return t->get<std::string>();
    }
  }
  if (wellFormedTraceparent(header)) return std::string(header);
  return {};
}

std::string historyRequestId(std::string id_json) {
  if (id_json.size() > 256) id_json.resize(256);
  return id_json;
}

bool isLoopbackListen(std::string_view listen) {
  return listen.rfind("127.", 0) == 0 || listen.rfind("[::1]", 0) == 0 ||
         listen.rfind("localhost:", 0) == 0;
}

}  // namespace pgwarden::mcp
