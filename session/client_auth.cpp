// One client's password exchange (see client_auth.h). Known and unknown names run the same
// code with a different secret: the made-up one is derived for every name, used or not, so even
// the derivation costs the same whether the user exists.
#include "session/client_auth.h"

#include <openssl/crypto.h>

#include <cstring>

#include "protocol/messages.h"

namespace pgwarden::session {

ClientAuth::ClientAuth(const config::UserConfig* user, std::string_view user_name,
                       const UnknownUserAuth& unknown, std::string unknown_reason)
    : known_(user != nullptr && user->method != config::AuthMethod::kTrust),
      method_(known_ ? user->method : unknown.method),
      unknown_reason_(std::move(unknown_reason)) {
  protocol::ScramVerifier mock = protocol::mockScramVerifier(
      user_name, unknown.salt_key, unknown.scram_iterations, unknown.scram_salt_len);
  std::string mock_md5 = protocol::mockMd5Verifier(user_name, unknown.salt_key);
  if (method_ == config::AuthMethod::kMd5) {
    md5_secret_ = known_ ? user->secret : std::move(mock_md5);
    return;
  }
  method_ = config::AuthMethod::kScramSha256;
  if (known_) {
    auto parsed = protocol::parseScramVerifier(user->secret);
    if (parsed) mock = std::move(*parsed);  // the config checked it; a bad one fails as unknown
    known_ = parsed.ok();
  }
  scram_ = std::make_unique<protocol::ScramServer>(std::move(mock));
}

ClientAuth::~ClientAuth() {
  if (!md5_secret_.empty()) OPENSSL_cleanse(md5_secret_.data(), md5_secret_.size());
}

void ClientAuth::begin(std::string& out) {
  if (method_ == config::AuthMethod::kMd5) {
    const std::string salt = protocol::randomBytes(4);
    std::memcpy(md5_salt_, salt.data(), 4);
    protocol::writeAuthMd5(out, md5_salt_);
    step_ = Step::kMd5;
    return;
  }
  protocol::writeAuthSasl(out, {"SCRAM-SHA-256"});
  step_ = Step::kSaslInitial;
}

ClientAuth::Outcome ClientAuth::fail(std::string specific) {
  step_ = Step::kDone;
  return {Verdict::kFailed, known_ ? std::move(specific) : unknown_reason_};
}

ClientAuth::Outcome ClientAuth::handle(char type, std::string_view body, std::string& out) {
  const auto violation = [this](std::string message) {
    step_ = Step::kDone;
    return Outcome{Verdict::kProtocolViolation, std::move(message)};
  };
  if (type != protocol::fe::kPassword) {
    // As PostgreSQL words it: the type as a number, so no byte of the client's reaches the text.
    return violation("expected a password message, got message type " +
                     std::to_string(static_cast<unsigned char>(type)));
  }
  switch (step_) {
    case Step::kSaslInitial: {
      auto m = protocol::parseSaslInitial(body);
      if (!m) return violation("malformed SASLInitialResponse: " + m.error());
      if (m->mechanism != "SCRAM-SHA-256") {
        return violation("client selected an invalid SASL authentication mechanism");
      }
      auto reply = scram_->handleClientFirst(m->data);
      if (!reply) return fail("malformed SCRAM client-first-message");
      protocol::writeAuthSaslContinue(out, *reply);
      step_ = Step::kSaslFinal;
      return {};
    }
    case Step::kSaslFinal: {
      auto m = protocol::parseSaslResponse(body);
      if (!m) return violation("malformed SASLResponse: " + m.error());
      auto reply = scram_->handleClientFinal(m->data);
      scram_.reset();
      if (!reply || !known_) return fail("wrong password (SCRAM)");
      protocol::writeAuthSaslFinal(out, *reply);
      step_ = Step::kDone;
      return {Verdict::kOk, {}};
    }
    case Step::kMd5: {
      auto p = protocol::parsePassword(body);
      if (!p) return violation("malformed password message: " + p.error());
      const std::string expected = protocol::md5Response(md5_secret_, md5_salt_);
      if (!protocol::constantTimeEquals(expected, p->password) || !known_) {
        return fail("wrong password (md5)");
      }
      step_ = Step::kDone;
      return {Verdict::kOk, {}};
    }
    case Step::kNone:
    case Step::kDone:
      break;
  }
  return violation("unexpected password message");
}

}  // namespace pgwarden::session
