#include "mcp/token_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

namespace pgwarden::mcp {

Sha256 sha256(std::string_view data) {
  Sha256 out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

std::string toHex(const Sha256& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned char c : digest) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

namespace {
int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::optional<Sha256> parseSha256Hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  Sha256 out{};
  for (size_t i = 0; i < 32; ++i) {
    const int hi = hexValue(hex[2 * i]);
    const int lo = hexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return out;
}

std::string generateToken() {
  static constexpr char kB64[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  unsigned char raw[33];
  if (RAND_bytes(raw, sizeof(raw)) != 1) return {};
  std::string out = "pgw_";
  // 33 bytes = 44 base64 characters without padding; the last is dropped to keep 256 bits + 2.
  for (size_t i = 0; i < sizeof(raw); i += 3) {
    const uint32_t v = (uint32_t{raw[i]} << 16) | (uint32_t{raw[i + 1]} << 8) | raw[i + 2];
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.push_back(kB64[(v >> 6) & 63]);
    out.push_back(kB64[v & 63]);
  }
  out.pop_back();
  return out;
}

std::optional<std::string_view> bearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() + 1) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? c + 32 : c) != kScheme[i]) return std::nullopt;
  }
  if (authorization[kScheme.size()] != ' ') return std::nullopt;
  std::string_view token = authorization.substr(kScheme.size() + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) return std::nullopt;
  return token;
}

std::optional<std::string> userForToken(const std::vector<config::McpToken>& tokens,
                                        std::string_view token) {
  const Sha256 digest = sha256(token);
  const config::McpToken* match = nullptr;
  for (const auto& t : tokens) {
    // No early exit: the time taken does not tell which entry (if any) matched.
    if (CRYPTO_memcmp(t.sha256.data(), digest.data(), digest.size()) == 0 && match == nullptr) {
      match = &t;
    }
  }
  if (match == nullptr) return std::nullopt;
  return match->user;
}

}  // namespace pgwarden::mcp
