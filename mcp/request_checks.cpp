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

bool isLoopbackListen(std::string_view listen) {
  return listen.rfind("127.", 0) == 0 || listen.rfind("[::1]", 0) == 0 ||
         listen.rfind("localhost:", 0) == 0;
}

}  // namespace pgwarden::mcp
