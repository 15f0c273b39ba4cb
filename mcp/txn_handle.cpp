// Write-transaction handles: minted and checked (txn_handle.h). The signature covers the whole
// text before it, so neither the instance, the boot nor the holder can be changed.
#include "mcp/txn_handle.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

namespace pgwarden::mcp {

namespace {

constexpr std::string_view kPrefix = "pgwt1.";
constexpr size_t kSignatureHex = 32;
constexpr size_t kMaxHandle = 512;
constexpr char kHandleHex[] = "0123456789abcdef";

std::string hexText(const uint8_t* p, size_t n) {
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHandleHex[p[i] >> 4]);
    out.push_back(kHandleHex[p[i] & 15]);
  }
  return out;
}

bool isHexText(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return !s.empty();
}

constexpr std::string_view kHandleB64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string base64url(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kHandleB64[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kHandleB64[(acc << (6 - bits)) & 63]);
  return out;
}

bool unbase64url(std::string_view in, std::string* out) {
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const size_t v = kHandleB64.find(c);
    if (v == std::string_view::npos) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

std::string signature(const HandleKey& key, std::string_view text) {
  uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &len);
  return hexText(mac, kSignatureHex / 2);
}

}  // namespace

std::string randomHexId() {
  uint8_t raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) return {};
  return hexText(raw, sizeof raw);
}

bool makeHandleKey(std::string instance, std::string_view shared_secret, HandleKey* out) {
  uint8_t boot[8];
  if (RAND_bytes(boot, sizeof boot) != 1) return false;
  out->shared = !shared_secret.empty();
  if (out->shared) {
    out->secret = std::string(shared_secret);
  } else {
    uint8_t secret[32];
    if (RAND_bytes(secret, sizeof secret) != 1) return false;
    out->secret.assign(reinterpret_cast<const char*>(secret), sizeof secret);
  }
  out->instance = std::move(instance);
  out->boot = hexText(boot, sizeof boot);
  return true;
}

std::string mintTxnHandle(const HandleKey& key, std::string_view holder) {
  std::string text(kPrefix);
  text += base64url(key.instance);
  text += '.';
  text += key.boot;
  text += '.';
  text += holder;
  const std::string sig = signature(key, text);
  text += '.';
  text += sig;
  return text;
}

HandleCheck checkTxnHandle(const HandleKey& key, std::string_view handle) {
  HandleCheck out;
  if (handle.size() > kMaxHandle || handle.substr(0, kPrefix.size()) != kPrefix) return out;
  std::vector<std::string_view> parts;
  for (std::string_view rest = handle.substr(kPrefix.size());;) {
    const size_t dot = rest.find('.');
    parts.push_back(rest.substr(0, dot));
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  std::string instance;
  if (parts.size() != 4 || parts[0].empty() || !unbase64url(parts[0], &instance) ||
      !isHexText(parts[1]) || !isHexText(parts[2]) || parts[3].size() != kSignatureHex) {
    return out;
  }
  const std::string expect = signature(key, handle.substr(0, handle.size() - kSignatureHex - 1));
  const bool signed_here = CRYPTO_memcmp(expect.data(), parts[3].data(), kSignatureHex) == 0;
  // Another instance's, or this one's before a restart. With the fleet's shared key its
  // signature is checked like ours; without it, the key that signed it is not ours, and what it
  // names is all the answer can go on (and all routing needs).
  const bool ours = instance == key.instance && parts[1] == key.boot;
  if ((ours || key.shared) && !signed_here) return HandleCheck{};
  out.instance = std::move(instance);
  if (!ours) {
    out.kind = out.instance == key.instance ? HandleCheck::Kind::kRestarted
                                            : HandleCheck::Kind::kElsewhere;
    out.verified = key.shared;
    return out;
  }
  out.kind = HandleCheck::Kind::kOurs;
  out.holder = std::string(parts[2]);
  return out;
}

}  // namespace pgwarden::mcp
