// SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it: no channel binding, no authzid,
// the username attribute ignored (the startup packet names the user). Both the server side that
// checks a client's proof against a stored verifier and the client side used to log in upstream.
// https://www.postgresql.org/docs/15/sasl-authentication.html
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <charconv>
#include <climits>
#include <mutex>

#include "protocol/auth.h"

namespace pgwarden::protocol {

namespace {

constexpr size_t kKeyLen = 32;       // SHA-256 output
constexpr size_t kRawNonceLen = 18;  // as PostgreSQL's SCRAM_RAW_NONCE_LEN
constexpr size_t kSaltLen = 16;      // as PostgreSQL's SCRAM_DEFAULT_SALT_LEN
constexpr std::string_view kPrefix = "SCRAM-SHA-256$";

// Wipes key material when it goes out of scope.
struct Secret {
  std::string bytes;
  ~Secret() {
    if (!bytes.empty()) OPENSSL_cleanse(bytes.data(), bytes.size());
  }
};

bool sha256(std::string_view data, std::string& out) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), d, &len, EVP_sha256(), nullptr) != 1) return false;
  out.assign(reinterpret_cast<const char*>(d), len);
  OPENSSL_cleanse(d, sizeof d);
  return true;
}

bool hmacSha256(std::string_view key, std::string_view data, std::string& out) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), int(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), d, &len) == nullptr) {
    return false;
  }
  out.assign(reinterpret_cast<const char*>(d), len);
  OPENSSL_cleanse(d, sizeof d);
  return true;
}

// SaltedPassword := Hi(Normalize(password), salt, i). SASLprep is the identity on printable
// ASCII, which is what PostgreSQL itself ends up using for such passwords; a non-ASCII password
// is used as its raw bytes (PostgreSQL would NFKC-normalise it first).
bool saltedPassword(std::string_view password, std::string_view salt, int iterations,
                    std::string& out) {
  out.assign(kKeyLen, '\0');
  return PKCS5_PBKDF2_HMAC(password.data(), int(password.size()),
                           reinterpret_cast<const unsigned char*>(salt.data()), int(salt.size()),
                           iterations, EVP_sha256(), int(kKeyLen),
                           reinterpret_cast<unsigned char*>(out.data())) == 1;
}

// The upstream login's PBKDF2 costs milliseconds of CPU on the event loop, and PostgreSQL keeps
// one salt and iteration count per role, so every login of a pool would compute the same key.
// A small cache keyed by a digest of (password, salt, iterations) keeps that work to the first
// login; entries are wiped when they are replaced.
class SaltedPasswordCache {
 public:
  bool get(std::string_view password, std::string_view salt, int iterations, std::string& out) {
    std::string key;
    if (!digestKey(password, salt, iterations, key)) return false;
    std::lock_guard lock(mu_);
    for (const Entry& e : entries_) {
      if (!e.key.empty() && e.key == key) {
        out = e.salted;
        return true;
      }
    }
    return false;
  }

  void put(std::string_view password, std::string_view salt, int iterations,
           const std::string& salted) {
    std::string key;
    if (!digestKey(password, salt, iterations, key)) return;
    std::lock_guard lock(mu_);
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % entries_.size();
    e.wipe();
    e.key = std::move(key);
    e.salted = salted;
  }

 private:
  struct Entry {
    std::string key, salted;
    void wipe() {
      if (!salted.empty()) OPENSSL_cleanse(salted.data(), salted.size());
      key.clear();
      salted.clear();
    }
    ~Entry() { wipe(); }
  };

  static bool digestKey(std::string_view password, std::string_view salt, int iterations,
                        std::string& out) {
    std::string material;
    material.reserve(password.size() + salt.size() + 16);
    material.append(password).push_back('\0');
    material.append(salt).push_back('\0');
    material.append(std::to_string(iterations));
    bool ok = sha256(material, out);
    OPENSSL_cleanse(material.data(), material.size());
    return ok;
  }

  std::mutex mu_;
  std::array<Entry, 16> entries_;
  size_t next_ = 0;
};

SaltedPasswordCache& saltedPasswordCache() {
  static SaltedPasswordCache cache;
  return cache;
}

bool cachedSaltedPassword(std::string_view password, std::string_view salt, int iterations,
                          std::string& out) {
  if (saltedPasswordCache().get(password, salt, iterations, out)) return true;
  if (!saltedPassword(password, salt, iterations, out)) return false;
  saltedPasswordCache().put(password, salt, iterations, out);
  return true;
}

// ClientKey, StoredKey and ServerKey from a salted password.
bool deriveKeys(std::string_view salted, std::string& client_key, std::string& stored_key,
                std::string& server_key) {
  return hmacSha256(salted, "Client Key", client_key) && sha256(client_key, stored_key) &&
         hmacSha256(salted, "Server Key", server_key);
}

std::string xorBytes(std::string_view a, std::string_view b) {
  std::string out(a.size(), '\0');
  for (size_t i = 0; i < a.size(); ++i) out[i] = char(a[i] ^ b[i]);
  return out;
}

// printable = %x21-2B / %x2D-7E: visible ASCII except ','.
bool isPrintable(std::string_view s) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e || c == ',') return false;
  }
  return true;
}

bool parsePositiveInt(std::string_view s, int& out) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > INT_MAX) return false;
  out = int(v);
  return true;
}

// Splits a SCRAM message into its comma-separated "x=value" attributes, front to back.
class AttrReader {
 public:
  explicit AttrReader(std::string_view msg) : rest_(msg) {}
  bool atEnd() const { return rest_.empty() && !pending_comma_; }
  // The next attribute must be `name`; its value is returned.
  bool expect(char name, std::string_view& value) {
    char got = 0;
    return any(got, value) && got == name;
  }
  // Any attribute: a letter, '=', then the value up to the next ',' or the end.
  bool any(char& name, std::string_view& value) {
    if (rest_.size() < 2) return false;
    const char c = rest_[0];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || rest_[1] != '=') return false;
    name = c;
    const size_t comma = rest_.find(',', 2);
    if (comma == std::string_view::npos) {
      value = rest_.substr(2);
      rest_ = {};
      pending_comma_ = false;
    } else {
      value = rest_.substr(2, comma - 2);
      rest_ = rest_.substr(comma + 1);
      pending_comma_ = true;  // a trailing ',' must be followed by another attribute
    }
    return true;
  }
  // What has not been read yet.
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
  bool pending_comma_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Verifiers
// ---------------------------------------------------------------------------------------------

Result<ScramVerifier> parseScramVerifier(std::string_view text) {
  auto fail = [] {
    return Result<ScramVerifier>::fail(
        "not a SCRAM-SHA-256 verifier (expected "
        "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>)");
  };
  if (text.substr(0, kPrefix.size()) != kPrefix) return fail();
  text.remove_prefix(kPrefix.size());
  const size_t dollar = text.find('$');
  if (dollar == std::string_view::npos) return fail();
  const std::string_view head = text.substr(0, dollar);
  const std::string_view keys = text.substr(dollar + 1);
  const size_t c1 = head.find(':');
  const size_t c2 = keys.find(':');
  if (c1 == std::string_view::npos || c2 == std::string_view::npos) return fail();

  ScramVerifier v;
  if (!parsePositiveInt(head.substr(0, c1), v.iterations)) return fail();
  auto salt = base64Decode(head.substr(c1 + 1));
  auto stored = base64Decode(keys.substr(0, c2));
  auto server = base64Decode(keys.substr(c2 + 1));
  if (!salt || salt->empty() || !stored || stored->size() != kKeyLen || !server ||
      server->size() != kKeyLen) {
    return fail();
  }
  v.salt = std::move(*salt);
  v.stored_key = std::move(*stored);
  v.server_key = std::move(*server);
  return v;
}

std::string makeScramVerifierWithSalt(std::string_view password, std::string_view salt,
                                      int iterations) {
  if (iterations < 1 || salt.empty()) return {};
  Secret salted, client_key;
  std::string stored_key, server_key;
  if (!saltedPassword(password, salt, iterations, salted.bytes) ||
      !deriveKeys(salted.bytes, client_key.bytes, stored_key, server_key)) {
    return {};
  }
  return std::string(kPrefix) + std::to_string(iterations) + ":" + base64Encode(salt) + "$" +
         base64Encode(stored_key) + ":" + base64Encode(server_key);
}

std::string makeScramVerifier(std::string_view password, int iterations) {
  return makeScramVerifierWithSalt(password, randomBytes(kSaltLen), iterations);
}

ScramVerifier mockScramVerifier(std::string_view user, std::string_view key, int iterations,
                                size_t salt_len) {
  ScramVerifier v;
  v.iterations = iterations < 1 ? 4096 : iterations;
  if (!hmacSha256(key, user, v.salt)) v.salt = randomBytes(kKeyLen);
  v.salt.resize(salt_len == 0 || salt_len > kKeyLen ? kSaltLen : salt_len);
  v.stored_key = randomBytes(kKeyLen);
  v.server_key = randomBytes(kKeyLen);
  return v;
}

std::string mockMd5Verifier(std::string_view user, std::string_view key) {
  // A label keeps this derivation apart from the SCRAM salt's, which an observer can see.
  std::string input = "md5:";
  input.append(user);
  Secret mac;
  if (!hmacSha256(key, input, mac.bytes)) mac.bytes = randomBytes(kKeyLen);
  return "md5" + md5Hash(mac.bytes).substr(0, 32);
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

ScramServer::ScramServer(ScramVerifier verifier) : verifier_(std::move(verifier)) {}

ScramServer::~ScramServer() {
  if (!verifier_.stored_key.empty()) {
    OPENSSL_cleanse(verifier_.stored_key.data(), verifier_.stored_key.size());
  }
  if (!verifier_.server_key.empty()) {
    OPENSSL_cleanse(verifier_.server_key.data(), verifier_.server_key.size());
  }
}

Result<std::string> ScramServer::handleClientFirst(std::string_view client_first) {
  using R = Result<std::string>;
  const bool in_order = state_ == State::kExpectFirst;
  state_ = State::kFailed;  // until proven otherwise; a step out of order ends the exchange
  if (!in_order) return R::fail("unexpected SCRAM client-first-message");

  // gs2-header: gs2-cbind-flag "," [authzid] ","
  if (client_first.size() < 3) return R::fail("malformed SCRAM message: too short");
  switch (client_first[0]) {
    case 'n':  // client does not support channel binding
    case 'y':  // client supports it but thinks we do not: true, we advertise no -PLUS mechanism
      if (client_first[1] != ',') return R::fail("malformed SCRAM message: bad gs2 header");
      break;
    case 'p':
      return R::fail("SCRAM channel binding was not advertised and is not supported");
    default:
      return R::fail("malformed SCRAM message: bad channel binding flag");
  }
  if (client_first[2] == 'a') return R::fail("SCRAM authorization identity is not supported");
  if (client_first[2] != ',') return R::fail("malformed SCRAM message: bad gs2 header");
  gs2_header_ = std::string(client_first.substr(0, 3));
  const std::string_view bare = client_first.substr(3);

  // client-first-message-bare: [reserved-mext ","] username "," nonce ["," extensions]
  AttrReader a(bare);
  std::string_view user, client_nonce;
  char name = 0;
  if (!a.any(name, user)) return R::fail("malformed SCRAM message: expected username");
  if (name == 'm') return R::fail("SCRAM extension is not supported");
  if (name != 'n') return R::fail("malformed SCRAM message: expected username");
  // The username is ignored, as PostgreSQL does: the startup packet named the user.
  if (!a.expect('r', client_nonce) || client_nonce.empty() || !isPrintable(client_nonce)) {
    return R::fail("malformed SCRAM message: bad client nonce");
  }
  std::string_view ext;
  while (!a.atEnd()) {
    if (!a.any(name, ext)) return R::fail("malformed SCRAM message: bad attribute");
  }

  client_first_bare_ = std::string(bare);
  std::string server_part = test_nonce_;
  if (server_part.empty()) server_part = base64Encode(randomBytes(kRawNonceLen));
  nonce_ = std::string(client_nonce) + server_part;
  server_first_ = "r=" + nonce_ + ",s=" + base64Encode(verifier_.salt) +
                  ",i=" + std::to_string(verifier_.iterations);
  state_ = State::kExpectFinal;
  return server_first_;
}

Result<std::string> ScramServer::handleClientFinal(std::string_view client_final) {
  using R = Result<std::string>;
  const bool in_order = state_ == State::kExpectFinal;
  state_ = State::kFailed;
  if (!in_order) return R::fail("unexpected SCRAM client-final-message");

  // client-final-message: "c=" b64(gs2-header) ",r=" nonce ["," extensions] ",p=" proof
  AttrReader a(client_final);
  std::string_view cbind, nonce, proof_b64;
  if (!a.expect('c', cbind)) return R::fail("malformed SCRAM message: expected channel binding");
  auto cbind_raw = base64Decode(cbind);
  if (!cbind_raw || *cbind_raw != gs2_header_) {
    return R::fail("SCRAM channel binding check failed");
  }
  if (!a.expect('r', nonce)) return R::fail("malformed SCRAM message: expected nonce");
  if (!constantTimeEquals(nonce, nonce_)) return R::fail("SCRAM nonce mismatch");
  size_t without_proof_len = 0;
  for (;;) {
    const size_t before = client_final.size() - a.rest().size();  // offset of the next attribute
    char name = 0;
    std::string_view value;
    if (!a.any(name, value)) return R::fail("malformed SCRAM message: expected proof");
    if (name == 'p') {
      without_proof_len = before - 1;  // drop the ',' before "p="
      proof_b64 = value;
      break;
    }
  }
  if (!a.atEnd()) return R::fail("malformed SCRAM message: garbage after the proof");
  auto proof = base64Decode(proof_b64);
  if (!proof || proof->size() != kKeyLen) return R::fail("malformed SCRAM message: bad proof");

  std::string auth_message = client_first_bare_;
  auth_message.append(",").append(server_first_).append(",");
  auth_message.append(client_final.substr(0, without_proof_len));

  // ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); the proof holds iff
  // H(ClientKey) == StoredKey.
  Secret signature, client_key;
  std::string computed_stored, server_signature;
  if (!hmacSha256(verifier_.stored_key, auth_message, signature.bytes) ||
      verifier_.stored_key.size() != kKeyLen) {
    return R::fail("SCRAM computation failed");
  }
  client_key.bytes = xorBytes(*proof, signature.bytes);
  if (!sha256(client_key.bytes, computed_stored) ||
      !constantTimeEquals(computed_stored, verifier_.stored_key)) {
    return R::fail("SCRAM proof does not match");
  }
  if (!hmacSha256(verifier_.server_key, auth_message, server_signature)) {
    return R::fail("SCRAM computation failed");
  }
  state_ = State::kDone;
  return "v=" + base64Encode(server_signature);
}

// ---------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------

ScramClient::ScramClient(std::string user, std::string password)
    : user_(std::move(user)), password_(std::move(password)) {}

ScramClient::~ScramClient() {
  if (!password_.empty()) OPENSSL_cleanse(password_.data(), password_.size());
}

std::string ScramClient::clientFirst() {
  nonce_ = test_nonce_.empty() ? base64Encode(randomBytes(kRawNonceLen)) : test_nonce_;
  // saslname escapes ',' and '=' (RFC 5802 section 5.1).
  std::string name;
  for (char c : user_) {
    if (c == ',') {
      name += "=2C";
    } else if (c == '=') {
      name += "=3D";
    } else {
      name += c;
    }
  }
  client_first_bare_ = "n=" + name + ",r=" + nonce_;
  state_ = State::kFirstSent;
  return "n,," + client_first_bare_;
}

Result<std::string> ScramClient::handleServerFirst(std::string_view server_first) {
  using R = Result<std::string>;
  const bool in_order = state_ == State::kFirstSent;
  state_ = State::kFailed;
  if (!in_order) return R::fail("unexpected SCRAM server-first-message");

  // server-first-message: [reserved-mext ","] "r=" nonce ",s=" salt ",i=" iteration-count
  AttrReader a(server_first);
  std::string_view nonce, salt_b64, iter_text;
  char name = 0;
  if (!a.any(name, nonce)) return R::fail("malformed SCRAM server-first-message");
  if (name == 'm') return R::fail("server requires an unsupported SCRAM extension");
  if (name != 'r' || nonce.size() <= nonce_.size() || nonce.substr(0, nonce_.size()) != nonce_ ||
      !isPrintable(nonce)) {
    return R::fail("invalid SCRAM response (nonce mismatch)");
  }
  if (!a.expect('s', salt_b64) || !a.expect('i', iter_text) || !a.atEnd()) {
    return R::fail("malformed SCRAM server-first-message");
  }
  auto salt = base64Decode(salt_b64);
  int iterations = 0;
  if (!salt || salt->empty()) return R::fail("malformed SCRAM server-first-message (salt)");
  if (!parsePositiveInt(iter_text, iterations) || iterations > kScramMaxIterations) {
    return R::fail("SCRAM iteration count is invalid or above the supported maximum");
  }

  Secret salted, client_key, signature;
  std::string stored_key, server_key;
  if (!cachedSaltedPassword(password_, *salt, iterations, salted.bytes) ||
      !deriveKeys(salted.bytes, client_key.bytes, stored_key, server_key)) {
    return R::fail("SCRAM computation failed");
  }
  // PostgreSQL's client sends no channel binding: c= is base64("n,,") = "biws".
  std::string without_proof = "c=biws,r=" + std::string(nonce);
  auth_message_ = client_first_bare_ + "," + std::string(server_first) + "," + without_proof;
  if (!hmacSha256(stored_key, auth_message_, signature.bytes) ||
      !hmacSha256(server_key, auth_message_, server_signature_)) {
    return R::fail("SCRAM computation failed");
  }
  OPENSSL_cleanse(server_key.data(), server_key.size());
  state_ = State::kFinalSent;
  return without_proof + ",p=" + base64Encode(xorBytes(client_key.bytes, signature.bytes));
}

Status ScramClient::verifyServerFinal(std::string_view server_final) {
  const bool in_order = state_ == State::kFinalSent;
  state_ = State::kFailed;
  if (!in_order) return Status::fail("unexpected SCRAM server-final-message");
  AttrReader a(server_final);
  char name = 0;
  std::string_view value;
  if (!a.any(name, value) || !a.atEnd()) {
    return Status::fail("malformed SCRAM server-final-message");
  }
  if (name == 'e') return Status::fail("server rejected SCRAM authentication");
  if (name != 'v') return Status::fail("malformed SCRAM server-final-message");
  auto signature = base64Decode(value);
  if (!signature || !constantTimeEquals(*signature, server_signature_)) {
    return Status::fail("incorrect server signature");
  }
  state_ = State::kDone;
  return {};
}

}  // namespace pgwarden::protocol
