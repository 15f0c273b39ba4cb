// The server side of one client's password exchange: which challenge the user gets and whether
// the answers prove the password. A name that is not a password user (unknown, or a trust user
// over TCP) gets the challenge of auth.unknown_user_method against a made-up secret and costs
// the same work as a real user with a wrong password, so nothing the client sees tells the two
// apart. Writes protocol messages into the caller's buffer; knows no socket.
// https://www.postgresql.org/docs/15/protocol-flow.html#id-1.10.6.7.3
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "config/config.h"
#include "protocol/auth.h"

namespace pgwarden::session {

// How a name that is not a password user is answered: from the config and the salt key.
struct UnknownUserAuth {
  config::AuthMethod method = config::AuthMethod::kScramSha256;  // scram-sha-256 or md5
  int scram_iterations = 4096;
  size_t scram_salt_len = 16;
  std::string_view salt_key;  // must outlive the ClientAuth's constructor call only
};

class ClientAuth {
 public:
  enum class Verdict {
    kContinue,           // a challenge went out: wait for the next password message
    kOk,                 // the password is proven (a SASLFinal, if any, is written)
    kFailed,             // wrong password or not a password user: FATAL 28P01 either way
    kProtocolViolation,  // a malformed message: FATAL 08P01
  };
  struct Outcome {
    Verdict verdict = Verdict::kContinue;
    std::string reason;  // kFailed: for the log only; kProtocolViolation: for the client too
  };

  // `user` is the entry whose secret is checked: a SCRAM or md5 user; null answers `user_name`
  // as unknown, and `unknown_reason` is what the log gives when that exchange fails.
  ClientAuth(const config::UserConfig* user, std::string_view user_name,
             const UnknownUserAuth& unknown, std::string unknown_reason);
  ~ClientAuth();
  ClientAuth(const ClientAuth&) = delete;
  ClientAuth& operator=(const ClientAuth&) = delete;

  // The first challenge: AuthenticationSASL or AuthenticationMD5Password.
  void begin(std::string& out);
  // One client message during authentication (a password message is type 'p').
  Outcome handle(char type, std::string_view body, std::string& out);

  // The method the challenge used (for tests and logs).
  config::AuthMethod method() const { return method_; }

 private:
  enum class Step { kNone, kSaslInitial, kSaslFinal, kMd5, kDone };
  Outcome fail(std::string specific);

  bool known_;
  config::AuthMethod method_;
  std::string unknown_reason_;
  std::string md5_secret_;  // "md5..." of the user, or made up
  uint8_t md5_salt_[4] = {0, 0, 0, 0};
  std::unique_ptr<protocol::ScramServer> scram_;
  Step step_ = Step::kNone;
};

}  // namespace pgwarden::session
