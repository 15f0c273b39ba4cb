// The chain's keys (a small file in daemon.state_dir), the canonical form of a record's fields,
// the HMAC, and the writer's running state per instance (see chain.h).
#include "history/chain.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/key_file.h"
#include "history/text.h"

namespace pgwarden::history {

namespace {

constexpr size_t kSecretBytes = 32;
constexpr size_t kMaxKeyFileBytes = 1 << 20;
constexpr char kHex[] = "0123456789abcdef";

// Written over `out`: the writer keeps one string for every record's hash.
void assignHex(std::string& out, const unsigned char* p, size_t n) {
  out.resize(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[p[i] >> 4];
    out[2 * i + 1] = kHex[p[i] & 0xf];
  }
}

std::string toHex(const unsigned char* p, size_t n) {
  std::string out;
  assignHex(out, p, n);
  return out;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool fromHex(std::string_view hex, unsigned char* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    const int hi = hexDigit(hex[2 * i]);
    const int lo = hexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

ChainKey newKey() {
  ChainKey k;
  k.secret.resize(kSecretBytes);
  if (RAND_bytes(reinterpret_cast<unsigned char*>(k.secret.data()), kSecretBytes) != 1) return {};
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(k.secret.data()), k.secret.size(), digest);
  k.id = toHex(digest, 4);
  return k;
}

std::string keyFileText(const ChainKeyring& ring) {
  std::string text;
  for (const auto& k : ring.keys) {
    text += k.id + " " +
            toHex(reinterpret_cast<const unsigned char*>(k.secret.data()), k.secret.size()) + "\n";
  }
  return text;
}

Result<ChainKeyring> parseKeyFile(const std::string& path) {
  using R = Result<ChainKeyring>;
  auto read = readKeyFile(path, kMaxKeyFileBytes);
  if (!read.ok()) return R::fail(read.error());
  const std::string& text = *read;
  ChainKeyring ring;
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    ChainKey k;
    k.secret.resize(kSecretBytes);
    if (space == std::string_view::npos || space == 0 ||
        !fromHex(line.substr(space + 1), reinterpret_cast<unsigned char*>(k.secret.data()),
                 kSecretBytes)) {
      return R::fail(path + ":" + std::to_string(line_no) +
                     ": not a key (expected \"<id> <64 hex digits>\")");
    }
    k.id = std::string(line.substr(0, space));
    ring.keys.push_back(std::move(k));
  }
  if (ring.keys.empty()) return R::fail(path + " holds no key");
  return ring;
}

}  // namespace

const ChainKey* ChainKeyring::find(std::string_view id) const {
  for (const auto& k : keys) {
    if (k.id == id) return &k;
  }
  return nullptr;
}

Result<ChainKeyring> loadChainKeys(const std::string& path, bool create) {
  using R = Result<ChainKeyring>;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || !create)
      return R::fail("cannot read " + path + ": " + std::strerror(errno));
    ChainKeyring ring;
    ring.keys.push_back(newKey());
    if (ring.keys.back().id.empty()) return R::fail("no random bytes for a new key");
    if (auto s = writeKeyFile(path, keyFileText(ring), false); !s.ok()) return R::fail(s.error());
  } else if ((st.st_mode & 077) != 0) {
    spdlog::warn(
        "history: the chain key file {} is readable by others; whoever reads it can "
        "rewrite the history undetected: chmod 600 it",
        path);
  }
  return parseKeyFile(path);
}

std::string chainKeyProblem(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return keyFileProblem(path);
  auto ring = parseKeyFile(path);
  return ring.ok() ? std::string() : ring.error();
}

Result<std::string> rotateChainKey(const std::string& path) {
  using R = Result<std::string>;
  auto ring = loadChainKeys(path, true);
  if (!ring.ok()) return R::fail(ring.error());
  ChainKey k = newKey();
  if (k.id.empty()) return R::fail("no random bytes for a new key");
  ring->keys.push_back(k);
  if (auto s = writeKeyFile(path, keyFileText(*ring), true); !s.ok()) return R::fail(s.error());
  return k.id;
}

std::string canonicalJson(std::string_view text) {
  if (text == "[]" || text.empty()) return std::string(text);
  auto parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded()) return std::string(text);
  return parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void canonicalFields(const RowValues& row, ChainFields& out) {
  const auto& values = row.values();
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    std::string& f = out[i];
    switch (v.type) {
      case ColumnType::kInt: f = std::to_string(v.i); break;
      case ColumnType::kBool: f = v.i != 0 ? "1" : "0"; break;
      case ColumnType::kJson: f = canonicalJson(v.text); break;
      case ColumnType::kTimestamp:
      case ColumnType::kText:
      case ColumnType::kUid: f.assign(v.text.data(), v.text.size()); break;
    }
  }
}

namespace {

// Whether field i stays out of the message: chain_hash itself, and the fields added after the
// chain existed while empty (so a record without them hashes as it did before they existed).
bool leftOut(size_t i, bool empty) {
  return i == kChainHashField || (i >= kFirstPostChainField && i < kRecordUidField && empty);
}

void appendField(std::string& out, std::string_view f) {
  const auto n = static_cast<uint32_t>(f.size());
  const char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                       static_cast<char>((n >> 16) & 0xff), static_cast<char>(n >> 24)};
  out.append(len, 4);
  out.append(f.data(), f.size());
}

void hmacOf(std::string_view secret, std::string_view message, ChainHash& out) {
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &len);
}

}  // namespace

void chainMessage(const ChainHash& prev, const ChainFields& fields, std::string& out) {
  out.assign(reinterpret_cast<const char*>(prev.data()), prev.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!leftOut(i, fields[i].empty())) appendField(out, fields[i]);
  }
}

const std::string& RowChainMessage::build(const ChainHash& prev, const RowValues& row) {
  out_.assign(reinterpret_cast<const char*>(prev.data()), prev.size());
  const auto& values = row.values();
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    std::string_view f;
    char digits[24];
    switch (v.type) {
      case ColumnType::kInt: {
        const auto end = std::to_chars(digits, digits + sizeof digits, v.i).ptr;
        f = std::string_view(digits, static_cast<size_t>(end - digits));
        break;
      }
      case ColumnType::kBool: f = v.i != 0 ? "1" : "0"; break;
      case ColumnType::kJson: {
        JsonCanon& c = json_[i];
        if (c.text != v.text) {
          c.text.assign(v.text.data(), v.text.size());
          c.canonical = canonicalJson(v.text);
        }
        f = c.canonical;
        break;
      }
      case ColumnType::kTimestamp:
      case ColumnType::kText:
      case ColumnType::kUid: f = v.text; break;
    }
    if (!leftOut(i, f.empty())) appendField(out_, f);
  }
  return out_;
}

ChainHash chainHash(std::string_view secret, const ChainHash& prev, const ChainFields& fields,
                    std::string& scratch) {
  chainMessage(prev, fields, scratch);
  ChainHash out{};
  hmacOf(secret, scratch, out);
  return out;
}

ChainMac::ChainMac() {
  mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac_ != nullptr) ctx_ = EVP_MAC_CTX_new(mac_);
}

ChainMac::~ChainMac() {
  EVP_MAC_CTX_free(ctx_);
  EVP_MAC_free(mac_);
}

ChainHash ChainMac::compute(const ChainKey& key, std::string_view message) {
  ChainHash out{};
  if (ctx_ == nullptr) {
    hmacOf(key.secret, message, out);
    return out;
  }
  bool ok = true;
  if (key.id != key_id_) {
    // The key's padded states are computed once; later inits reuse them (a NULL key).
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                                 OSSL_PARAM_construct_end()};
    ok = EVP_MAC_init(ctx_, reinterpret_cast<const unsigned char*>(key.secret.data()),
                      key.secret.size(), params) == 1;
    key_id_ = ok ? key.id : std::string();
  } else {
    ok = EVP_MAC_init(ctx_, nullptr, 0, nullptr) == 1;
  }
  size_t len = 0;
  if (!ok ||
      EVP_MAC_update(ctx_, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1 ||
      EVP_MAC_final(ctx_, out.data(), &len, out.size()) != 1) {
    key_id_.clear();
    hmacOf(key.secret, message, out);
  }
  return out;
}

std::string hexOf(const ChainHash& h) { return toHex(h.data(), h.size()); }

bool parseChainHash(std::string_view hex, ChainHash* out) {
  return fromHex(hex, out->data(), out->size());
}

Status Chainer::link(RowValues& row, const TailLookup& lookup) {
  const std::string_view instance = row.values()[kInstanceIdField].text;
  auto it = states_.find(instance);
  if (it == states_.end()) {
    auto tail = lookup(instance);
    if (!tail.ok()) return Status::fail("reading the chain's last record: " + tail.error());
    it = states_.emplace(std::string(instance), State{tail->seq, tail->hash, tail->key_id}).first;
  }
  State& st = it->second;
  const ChainKey& key = keys_.current();
  const uint64_t seq = st.seq + 1;
  row.setChain(seq, key.id, "");
  st.hash = mac_.compute(key, message_.build(st.hash, row));
  st.seq = seq;
  assignHex(hash_hex_, st.hash.data(), st.hash.size());
  row.setChain(seq, key.id, hash_hex_);
  if (seq % kChainCheckpointEvery == 0 || st.key_id != key.id) {
    checkpoints_.push_back({it->first, seq, key.id, hash_hex_});
  }
  st.key_id = key.id;
  return {};
}

void Chainer::commit() {
  // In the log as well as the store: an operator who ships the log elsewhere has anchors that a
  // writer to the store cannot rewrite.
  for (const auto& c : checkpoints_) {
    spdlog::info("history: chain checkpoint instance={} chain_seq={} key={} chain_hash={}",
                 c.instance, c.seq, c.key_id, c.hash_hex);
  }
  checkpoints_.clear();
}

}  // namespace pgwarden::history
