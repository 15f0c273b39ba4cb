// Bearer and Basic credentials checked against one configured secret, in time that does not
// depend on where a wrong guess first differs.
#include "net/http_auth.h"

#include <cstdint>
#include <optional>

#include "common/ascii.h"

namespace pgwarden::net {

namespace {


std::string_view trimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::optional<std::string> base64Decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = base64Value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// Time depends on the expected secret's length only, not on where the first difference is.
bool constantTimeEquals(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

}  // namespace

bool authorized(const HttpAuth& auth, std::string_view header) {
  switch (auth.kind) {
    case HttpAuth::Kind::kNone:
      return true;
    case HttpAuth::Kind::kBearer: {
      size_t sp = header.find(' ');
      if (sp == std::string_view::npos || !iequals(header.substr(0, sp), "bearer")) {
        return false;
      }
      return constantTimeEquals(trimOws(header.substr(sp + 1)), auth.secret);
    }
    case HttpAuth::Kind::kBasic: {
      size_t sp = header.find(' ');
      if (sp == std::string_view::npos || !iequals(header.substr(0, sp), "basic")) {
        return false;
      }
      auto decoded = base64Decode(trimOws(header.substr(sp + 1)));
      return decoded && constantTimeEquals(*decoded, auth.secret);
    }
  }
  return false;
}

}  // namespace pgwarden::net
