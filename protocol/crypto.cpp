// Small crypto building blocks for authentication: strict base64, random bytes, constant-time
// comparison, and PostgreSQL's md5 password scheme. Everything comes from OpenSSL.
// md5 scheme: https://www.postgresql.org/docs/15/protocol-flow.html#id-1.10.6.7.3
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include "protocol/auth.h"

namespace pgwarden::protocol {

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Value of a base64 digit, or -1.
constexpr std::array<int8_t, 256> makeB64Table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[uint8_t(kB64[i])] = int8_t(i);
  return t;
}
constexpr std::array<int8_t, 256> kB64Values = makeB64Table();

std::string toHex(const unsigned char* p, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kHex[p[i] >> 4];
    s[2 * i + 1] = kHex[p[i] & 0xf];
  }
  return s;
}

}  // namespace

std::string base64Encode(std::string_view raw) {
  std::string out;
  out.reserve((raw.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= raw.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(raw[i])) << 16) | (uint32_t(uint8_t(raw[i + 1])) << 8) |
                       uint32_t(uint8_t(raw[i + 2]));
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.push_back(kB64[(v >> 6) & 63]);
    out.push_back(kB64[v & 63]);
  }
  const size_t rest = raw.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t(uint8_t(raw[i])) << 16;
    if (rest == 2) v |= uint32_t(uint8_t(raw[i + 1])) << 8;
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.push_back(rest == 2 ? kB64[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// Strict RFC 4648: padded to a multiple of 4, no whitespace, padding only at the end, canonical.
// SCRAM attributes never contain anything else, so anything else is a malformed message.
std::optional<std::string> base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') {
    pad = text[text.size() - 2] == '=' ? 2 : 1;  // size is a non-zero multiple of 4 here
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t digits = last ? 4 - pad : 4;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      int8_t d = 0;
      if (k < digits) {
        d = kB64Values[uint8_t(text[i + k])];
        if (d < 0) return std::nullopt;
      }
      v = (v << 6) | uint32_t(d);
    }
    // Canonical only: the bits a short final group leaves over must be zero, so each byte
    // string has exactly one accepted encoding.
    if ((digits == 2 && (v & 0xffff) != 0) || (digits == 3 && (v & 0xff) != 0)) {
      return std::nullopt;
    }
    out.push_back(char(v >> 16));
    if (digits > 2) out.push_back(char(v >> 8));
    if (digits > 3) out.push_back(char(v));
  }
  return out;
}

std::string randomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), int(n)) != 1) {
    // Nonces and salts from a failed generator would be guessable, which silently breaks
    // authentication for everyone; stopping loudly is the only safe answer.
    std::fputs("pgwarden: OpenSSL RAND_bytes failed; cannot generate secure random data\n", stderr);
    std::abort();
  }
  return out;
}

bool constantTimeEquals(std::string_view a, std::string_view b) {
  // Lengths are public (digests have fixed sizes); only the contents are compared in fixed time.
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string md5Hash(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_md5(), nullptr) != 1) return {};
  return toHex(digest, len);
}

std::string md5Verifier(std::string_view user, std::string_view password) {
  std::string input;
  input.reserve(password.size() + user.size());
  input.append(password).append(user);
  std::string out = "md5" + md5Hash(input);
  OPENSSL_cleanse(input.data(), input.size());
  return out;
}

std::string md5Response(std::string_view md5_verifier_hex_with_prefix, const uint8_t salt[4]) {
  std::string_view hex = md5_verifier_hex_with_prefix;
  if (hex.size() == 35 && hex.substr(0, 3) == "md5") hex.remove_prefix(3);
  std::string input(hex);
  input.append(reinterpret_cast<const char*>(salt), 4);
  return "md5" + md5Hash(input);
}

std::string md5PasswordResponse(std::string_view user, std::string_view password,
                                const uint8_t salt[4]) {
  return md5Response(md5Verifier(user, password), salt);
}

}  // namespace pgwarden::protocol
