// Authentication mechanics, both sides: SCRAM-SHA-256 (RFC 5802 / RFC 7677) as server (clients
// proving a password against a stored verifier) and as client (pgwarden logging in upstream),
// and PostgreSQL's md5 scheme. Crypto from OpenSSL. Knows nothing of users or config.
// https://www.postgresql.org/docs/15/sasl-authentication.html
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace pgwarden::protocol {

// A parsed "SCRAM-SHA-256$<iterations>:<salt b64>$<StoredKey b64>:<ServerKey b64>" verifier.
struct ScramVerifier {
  int iterations = 0;
  std::string salt;        // raw bytes
  std::string stored_key;  // raw 32 bytes
  std::string server_key;  // raw 32 bytes
};
Result<ScramVerifier> parseScramVerifier(std::string_view text);
// Builds a verifier string from a password (random 16-byte salt, 4096 iterations by default).
std::string makeScramVerifier(std::string_view password, int iterations = 4096);
// Same with a given salt, for tests. Both return "" if iterations < 1, the salt is empty, or
// OpenSSL fails (parseScramVerifier rejects "").
std::string makeScramVerifierWithSalt(std::string_view password, std::string_view salt,
                                      int iterations);
// A verifier for a user that does not exist, so the exchange runs to the end and fails like a
// wrong password: the salt is HMAC-SHA256(key, user) cut to `salt_len` bytes (at most 32), so it
// is the same on every attempt and, with a key that persists, across restarts, as PostgreSQL's
// mock salt; the keys are random so no proof matches. Give the iteration count and salt length
// real users have, so that nothing in server-first-message tells the two apart.
ScramVerifier mockScramVerifier(std::string_view user, std::string_view key, int iterations = 4096,
                                size_t salt_len = 16);
// An md5 hash ("md5" + 32 hex digits) for a user that does not exist, derived from `key` and
// `user`: checking a response against it costs what checking a real user's does.
std::string mockMd5Verifier(std::string_view user, std::string_view key);

// The client refuses a server-first-message asking for more PBKDF2 rounds than this: each round
// is CPU time on the caller's thread (4096 is PostgreSQL's default).
inline constexpr int kScramMaxIterations = 1'000'000;

// Server side of one SCRAM-SHA-256 exchange (no channel binding: we advertise SCRAM-SHA-256 only).
// Each handle* step may be called once, in order; any failure ends the exchange (later calls
// fail too).
class ScramServer {
 public:
  explicit ScramServer(ScramVerifier verifier);
  ~ScramServer();  // wipes the keys
  ScramServer(ScramServer&&) = default;
  ScramServer& operator=(ScramServer&&) = default;
  ScramServer(const ScramServer&) = delete;
  ScramServer& operator=(const ScramServer&) = delete;
  // client-first-message -> server-first-message. Fails on a malformed message.
  Result<std::string> handleClientFirst(std::string_view client_first);
  // client-final-message -> server-final-message ("v=..."). Fails on malformed input or a wrong
  // proof; the caller answers 28P01 either way without saying which.
  Result<std::string> handleClientFinal(std::string_view client_final);
  // For tests: fixes the server nonce part instead of a random one.
  void setNonceForTest(std::string nonce) { test_nonce_ = std::move(nonce); }
  // True once handleClientFinal has accepted the proof.
  bool succeeded() const { return state_ == State::kDone; }

 private:
  enum class State { kExpectFirst, kExpectFinal, kDone, kFailed };
  ScramVerifier verifier_;
  std::string client_first_bare_, server_first_, nonce_, test_nonce_;
  std::string gs2_header_;  // "n,," or "y,,": what c= must carry in the final message
  State state_ = State::kExpectFirst;
};

// Client side of one SCRAM-SHA-256 exchange.
// `user` goes into the n= attribute (escaped); PostgreSQL ignores it, and libpq sends it empty,
// so pass "" to look exactly like libpq. Steps in order: clientFirst, handleServerFirst,
// verifyServerFinal; the login only counts as done once verifyServerFinal succeeds.
class ScramClient {
 public:
  ScramClient(std::string user, std::string password);
  ~ScramClient();  // wipes the password
  ScramClient(ScramClient&&) = default;
  ScramClient& operator=(ScramClient&&) = default;
  ScramClient(const ScramClient&) = delete;
  ScramClient& operator=(const ScramClient&) = delete;
  std::string clientFirst();  // "n,,n=<user>,r=<nonce>"
  // -> client-final. Runs PBKDF2 with the server's iteration count (capped at
  // kScramMaxIterations): milliseconds of CPU at PostgreSQL's default 4096.
  Result<std::string> handleServerFirst(std::string_view server_first);
  Status verifyServerFinal(std::string_view server_final);
  void setNonceForTest(std::string nonce) { test_nonce_ = std::move(nonce); }

 private:
  enum class State { kInit, kFirstSent, kFinalSent, kDone, kFailed };
  std::string user_, password_, nonce_, test_nonce_, client_first_bare_, auth_message_;
  std::string server_signature_;
  State state_ = State::kInit;
};

// PostgreSQL md5: "md5" + md5hex(md5hex(password + user) + salt).
std::string md5Hash(std::string_view data);                       // hex digest
std::string md5Verifier(std::string_view user, std::string_view password);  // "md5" + hex
std::string md5Response(std::string_view md5_verifier_hex_with_prefix, const uint8_t salt[4]);
std::string md5PasswordResponse(std::string_view user, std::string_view password,
                                const uint8_t salt[4]);

std::string base64Encode(std::string_view raw);
std::optional<std::string> base64Decode(std::string_view text);
// Cryptographically random bytes (OpenSSL RAND_bytes).
std::string randomBytes(size_t n);
// Constant-time comparison.
bool constantTimeEquals(std::string_view a, std::string_view b);

}  // namespace pgwarden::protocol
