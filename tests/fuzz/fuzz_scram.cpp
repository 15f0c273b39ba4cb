// libFuzzer target: the SCRAM-SHA-256 server as an unauthenticated client drives it. The input is
// a client-first-message (length-prefixed) and a client-final-message; the server holds a fixed
// verifier of a password no input knows, with one PBKDF2 round so the fuzzer stays fast. Reaching
// a successful login would be an authentication bypass: it traps.
#include "protocol/auth.h"
#include "tests/fuzz/fuzz_util.h"

namespace pgw = pgwarden::protocol;
using pgwarden::fuzz::Input;

namespace {

const pgw::ScramVerifier& verifier() {
  static const pgw::ScramVerifier v = [] {
    auto parsed = pgw::parseScramVerifier(
        pgw::makeScramVerifierWithSalt("pgwarden-fuzz-secret-never-sent", "fixed-fuzz-salt", 1));
    PGW_FUZZ_CHECK(parsed.ok() && parsed->iterations == 1);
    return *parsed;
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const size_t first_len = size_t(in.byte()) << 8 | in.byte();
  const std::string_view client_first = in.take(first_len);
  const std::string_view client_final = in.rest();

  pgw::ScramServer server(verifier());
  // A fixed server nonce keeps every run reproducible (the daemon draws it from RAND_bytes).
  server.setNonceForTest("ZnV6ei1zZXJ2ZXItbm9uY2U=");
  const auto first = server.handleClientFirst(client_first);
  if (first.ok()) {
    PGW_FUZZ_CHECK(first->rfind("r=", 0) == 0 && first->find(",s=") != std::string::npos);
    const auto final = server.handleClientFinal(client_final);
    PGW_FUZZ_CHECK(!final.ok());
  } else {
    PGW_FUZZ_CHECK(!server.handleClientFinal(client_final).ok());
  }
  PGW_FUZZ_CHECK(!server.succeeded());
  // A step out of order fails and never succeeds afterwards.
  PGW_FUZZ_CHECK(!server.handleClientFirst(client_first).ok());
  PGW_FUZZ_CHECK(!server.succeeded());

  if ((mode & 1) != 0) {
    // The verifier text an operator writes in the config, and base64 both ways.
    if (auto v = pgw::parseScramVerifier(client_final)) {
      PGW_FUZZ_CHECK(v->iterations >= 1 && !v->salt.empty());
      PGW_FUZZ_CHECK(v->stored_key.size() == 32 && v->server_key.size() == 32);
    }
    if (auto raw = pgw::base64Decode(client_final)) {
      const auto again = pgw::base64Decode(pgw::base64Encode(*raw));
      PGW_FUZZ_CHECK(again && *again == *raw);
    }
  }
  return 0;
}
