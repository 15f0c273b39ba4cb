// A client's password exchange: a name that is not a password user gets the challenge of
// auth.unknown_user_method, a salt that depends only on the name and the key, and fails the way
// a wrong password does; known users get in with the right password and only with it.
#include "session/client_auth.h"

#include <gtest/gtest.h>
#include <openssl/hmac.h>

#include <cstring>
#include <string>

#include "protocol/auth.h"

namespace pgwarden::daemon {
namespace {

constexpr std::string_view kKey = "0123456789abcdef0123456789abcdef";

struct AuthMessage {
  uint32_t code = 0;
  std::string data;
};

// The one AuthenticationXXX message in `out`, consumed.
AuthMessage takeAuth(std::string& out) {
  AuthMessage m;
  EXPECT_GE(out.size(), 9u);
  if (out.size() < 9) return m;
  EXPECT_EQ(out[0], 'R');
  const auto u8 = [&out](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(out[i])); };
  const uint32_t len = (u8(1) << 24) | (u8(2) << 16) | (u8(3) << 8) | u8(4);
  m.code = (u8(5) << 24) | (u8(6) << 16) | (u8(7) << 8) | u8(8);
  m.data = out.substr(9, len - 8);
  EXPECT_EQ(out.size(), len + 1) << "exactly one message";
  out.clear();
  return m;
}

std::string int32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (24 - 8 * i));
  return s;
}

std::string saslInitial(std::string_view data) {
  return std::string("SCRAM-SHA-256") + '\0' + int32(static_cast<uint32_t>(data.size())) +
         std::string(data);
}

std::string cstring(std::string_view s) { return std::string(s) + '\0'; }

config::UserConfig scramUser(const std::string& password, int iterations = 4096) {
  config::UserConfig u;
  u.name = "agent";
  u.method = config::AuthMethod::kScramSha256;
  u.secret = protocol::makeScramVerifierWithSalt(password, "0123456789abcdef", iterations);
  return u;
}

config::UserConfig md5User(const std::string& password) {
  config::UserConfig u;
  u.name = "m";
  u.method = config::AuthMethod::kMd5;
  u.secret = protocol::md5Verifier("m", password);
  return u;
}

// Runs a whole SCRAM exchange with `password`; returns the final verdict and, through
// `server_first`, what the server revealed.
session::ClientAuth::Outcome scramLogin(session::ClientAuth& auth, const std::string& password,
                                        std::string* server_first = nullptr) {
  std::string out;
  auth.begin(out);
  const AuthMessage sasl = takeAuth(out);
  EXPECT_EQ(sasl.code, 10u);  // AuthenticationSASL
  EXPECT_EQ(sasl.data, std::string("SCRAM-SHA-256") + '\0' + '\0');
  protocol::ScramClient client("", password);
  auto o = auth.handle('p', saslInitial(client.clientFirst()), out);
  if (o.verdict != session::ClientAuth::Verdict::kContinue) return o;
  const AuthMessage cont = takeAuth(out);
  EXPECT_EQ(cont.code, 11u);  // AuthenticationSASLContinue
  if (server_first) *server_first = cont.data;
  auto final_msg = client.handleServerFirst(cont.data);
  EXPECT_TRUE(final_msg.ok());
  return auth.handle('p', *final_msg, out);
}

session::ClientAuth::Outcome md5Login(session::ClientAuth& auth, const std::string& user,
                                      const std::string& password) {
  std::string out;
  auth.begin(out);
  const AuthMessage md5 = takeAuth(out);
  EXPECT_EQ(md5.code, 5u);  // AuthenticationMD5Password
  EXPECT_EQ(md5.data.size(), 4u);
  uint8_t salt[4];
  std::memcpy(salt, md5.data.data(), 4);
  return auth.handle('p', cstring(protocol::md5PasswordResponse(user, password, salt)), out);
}

std::string saltOf(const std::string& server_first) {
  const size_t s = server_first.find(",s=");
  const size_t i = server_first.find(",i=");
  return *protocol::base64Decode(server_first.substr(s + 3, i - s - 3));
}

TEST(ClientAuth, ScramUserWithTheRightPasswordGetsIn) {
  const config::UserConfig u = scramUser("right");
  session::ClientAuth auth(&u, "agent", session::UnknownUserAuth{.salt_key = kKey}, "no such user");
  EXPECT_EQ(scramLogin(auth, "right").verdict, session::ClientAuth::Verdict::kOk);
  session::ClientAuth wrong(&u, "agent", session::UnknownUserAuth{.salt_key = kKey},
                            "no such user");
  const auto o = scramLogin(wrong, "wrong");
  EXPECT_EQ(o.verdict, session::ClientAuth::Verdict::kFailed);
  EXPECT_EQ(o.reason, "wrong password (SCRAM)");
}

TEST(ClientAuth, UnknownUserUnderScramLooksLikeARealUser) {
  session::UnknownUserAuth unknown{.method = config::AuthMethod::kScramSha256,
                                   .scram_iterations = 8192,
                                   .scram_salt_len = 16,
                                   .salt_key = kKey};
  session::ClientAuth a(nullptr, "ghost", unknown, "no such user");
  std::string first_a;
  const auto o = scramLogin(a, "anything", &first_a);
  EXPECT_EQ(o.verdict, session::ClientAuth::Verdict::kFailed);
  EXPECT_EQ(o.reason, "no such user");
  EXPECT_NE(first_a.find(",i=8192"), std::string::npos) << first_a;
  // The salt is HMAC-SHA256(key, name) cut to the real users' length: the same on every
  // attempt and after a restart with the same key, different for another name.
  unsigned char mac[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), kKey.data(), static_cast<int>(kKey.size()),
       reinterpret_cast<const unsigned char*>("ghost"), 5, mac, &len);
  EXPECT_EQ(saltOf(first_a), std::string(reinterpret_cast<char*>(mac), 16));
  session::ClientAuth again(nullptr, "ghost", unknown, "no such user");
  std::string first_again;
  scramLogin(again, "other", &first_again);
  EXPECT_EQ(saltOf(first_again), saltOf(first_a));
  session::ClientAuth other(nullptr, "ghost2", unknown, "no such user");
  std::string first_other;
  scramLogin(other, "anything", &first_other);
  EXPECT_NE(saltOf(first_other), saltOf(first_a));
}

TEST(ClientAuth, UnknownUserUnderMd5GetsTheMd5Challenge) {
  session::UnknownUserAuth unknown{.method = config::AuthMethod::kMd5, .salt_key = kKey};
  session::ClientAuth auth(nullptr, "ghost", unknown, "no such user");
  EXPECT_EQ(auth.method(), config::AuthMethod::kMd5);
  const auto o = md5Login(auth, "ghost", "anything");
  EXPECT_EQ(o.verdict, session::ClientAuth::Verdict::kFailed);
  EXPECT_EQ(o.reason, "no such user");
}

TEST(ClientAuth, Md5UserWithTheRightPasswordGetsIn) {
  const config::UserConfig u = md5User("right");
  session::ClientAuth auth(&u, "m", session::UnknownUserAuth{.salt_key = kKey}, "no such user");
  EXPECT_EQ(auth.method(), config::AuthMethod::kMd5);  // its own method, whatever unknown users get
  EXPECT_EQ(md5Login(auth, "m", "right").verdict, session::ClientAuth::Verdict::kOk);
  session::ClientAuth wrong(&u, "m", session::UnknownUserAuth{.salt_key = kKey}, "no such user");
  const auto o = md5Login(wrong, "m", "wrong");
  EXPECT_EQ(o.verdict, session::ClientAuth::Verdict::kFailed);
  EXPECT_EQ(o.reason, "wrong password (md5)");
}

TEST(ClientAuth, TrustUserPassedAsUnknownIsAnsweredAsUnknown) {
  config::UserConfig t;
  t.name = "analyst";
  t.method = config::AuthMethod::kTrust;
  session::ClientAuth auth(&t, "analyst", session::UnknownUserAuth{.salt_key = kKey},
                           "trust user over TCP");
  const auto o = scramLogin(auth, "");
  EXPECT_EQ(o.verdict, session::ClientAuth::Verdict::kFailed);
  EXPECT_EQ(o.reason, "trust user over TCP");
}

TEST(ClientAuth, AMessageThatIsNotAPasswordIsAViolationNamedByNumber) {
  session::ClientAuth auth(nullptr, "ghost", session::UnknownUserAuth{.salt_key = kKey},
                           "no such user");
  std::string out;
  auth.begin(out);
  const auto o = auth.handle('\0', "", out);
  EXPECT_EQ(o.verdict, session::ClientAuth::Verdict::kProtocolViolation);
  EXPECT_EQ(o.reason, "expected a password message, got message type 0");
  EXPECT_EQ(o.reason.find('\0'), std::string::npos);
}

TEST(ClientAuth, MalformedScramMessagesFailAsUnknownWithoutSayingSo) {
  session::ClientAuth auth(nullptr, "ghost", session::UnknownUserAuth{.salt_key = kKey},
                           "no such user");
  std::string out;
  auth.begin(out);
  out.clear();
  const auto o = auth.handle('p', saslInitial("x"), out);
  EXPECT_EQ(o.verdict, session::ClientAuth::Verdict::kFailed);
  EXPECT_EQ(o.reason, "no such user");
  EXPECT_TRUE(out.empty());
}

TEST(MockVerifiers, Md5MockIsAValidStableHashPerUser) {
  const std::string a = protocol::mockMd5Verifier("ghost", kKey);
  EXPECT_EQ(a.size(), 35u);
  EXPECT_EQ(a.substr(0, 3), "md5");
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", 3), std::string::npos);
  EXPECT_EQ(a, protocol::mockMd5Verifier("ghost", kKey));
  EXPECT_NE(a, protocol::mockMd5Verifier("ghost2", kKey));
  EXPECT_NE(a, protocol::mockMd5Verifier("ghost", "another key of 16+ chars"));
}

}  // namespace
}  // namespace pgwarden::daemon
