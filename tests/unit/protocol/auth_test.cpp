// SCRAM-SHA-256 against the RFC 7677 test vector and a verifier made by PostgreSQL 15 itself,
// server and client driven against each other, malformed and hostile messages, md5 values
// computed with md5sum (and the md5 verifier PostgreSQL 15 stored), and strict base64.
#include "protocol/auth.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pgwarden::protocol {
namespace {

// RFC 7677 section 3.
constexpr std::string_view kRfcClientNonce = "rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kRfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr std::string_view kRfcSalt = "W22ZaJ0SNY7soEsUEjb6gQ==";
constexpr std::string_view kRfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kRfcServerFirst =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr std::string_view kRfcClientFinal =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr std::string_view kRfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

// `CREATE ROLE alice PASSWORD 'pencil'` on PostgreSQL 15 with scram-sha-256 stored this.
constexpr std::string_view kPostgresVerifier =
    "SCRAM-SHA-256$4096:bD+ACNZw4A9QNBLKS+ZUxA==$c57zrBzzcVa43fbccZk6Jq/+uxflLA6SC4XKl73Ahdg=:"
    "YcrmDIr1D05WtGM1OOMBRoq5Lp8T/JBE41vkmHHu0cs=";

std::string rfcVerifier() {
  return makeScramVerifierWithSalt("pencil", *base64Decode(kRfcSalt), 4096);
}

// Runs a whole exchange; returns whether both sides accepted.
bool runExchange(const std::string& verifier_text, const std::string& password) {
  auto verifier = parseScramVerifier(verifier_text);
  EXPECT_TRUE(verifier) << verifier_text;
  if (!verifier) return false;
  ScramServer server(*verifier);
  ScramClient client("", password);
  auto sf = server.handleClientFirst(client.clientFirst());
  if (!sf) return false;
  auto cf = client.handleServerFirst(*sf);
  if (!cf) return false;
  auto fin = server.handleClientFinal(*cf);
  if (!fin) return false;
  return client.verifyServerFinal(*fin).ok() && server.succeeded();
}

TEST(Scram, Rfc7677ClientSide) {
  ScramClient client("user", "pencil");
  client.setNonceForTest(std::string(kRfcClientNonce));
  EXPECT_EQ(client.clientFirst(), kRfcClientFirst);
  auto final_msg = client.handleServerFirst(kRfcServerFirst);
  ASSERT_TRUE(final_msg) << final_msg.error();
  EXPECT_EQ(*final_msg, kRfcClientFinal);
  EXPECT_TRUE(client.verifyServerFinal(kRfcServerFinal).ok());
}

// Logins after the first reuse the salted password (one PBKDF2 per role, not per login): the
// proofs must stay exactly the RFC's, and another password with the same salt must not be served
// the cached key.
TEST(Scram, RepeatedLoginsKeepTheRfcProofAndTellPasswordsApart) {
  for (int i = 0; i < 3; ++i) {
    ScramClient client("user", "pencil");
    client.setNonceForTest(std::string(kRfcClientNonce));
    (void)client.clientFirst();
    auto final_msg = client.handleServerFirst(kRfcServerFirst);
    ASSERT_TRUE(final_msg) << final_msg.error();
    EXPECT_EQ(*final_msg, kRfcClientFinal) << "login " << i;
    EXPECT_TRUE(client.verifyServerFinal(kRfcServerFinal).ok());
  }
  ScramClient other("user", "pencil2");
  other.setNonceForTest(std::string(kRfcClientNonce));
  (void)other.clientFirst();
  auto wrong = other.handleServerFirst(kRfcServerFirst);
  ASSERT_TRUE(wrong) << wrong.error();
  EXPECT_NE(*wrong, kRfcClientFinal);
  EXPECT_FALSE(other.verifyServerFinal(kRfcServerFinal).ok());
  // More distinct (password, salt) pairs than the cache holds still all log in correctly.
  for (int i = 0; i < 40; ++i) {
    std::string pw = "pw-" + std::to_string(i % 20);
    EXPECT_TRUE(runExchange(makeScramVerifierWithSalt(pw, "salt-" + std::to_string(i % 20), 64),
                            pw));
  }
}

TEST(Scram, Rfc7677ServerSide) {
  auto verifier = parseScramVerifier(rfcVerifier());
  ASSERT_TRUE(verifier) << verifier.error();
  ScramServer server(*verifier);
  server.setNonceForTest(std::string(kRfcServerNonce));
  auto sf = server.handleClientFirst(kRfcClientFirst);
  ASSERT_TRUE(sf) << sf.error();
  EXPECT_EQ(*sf, kRfcServerFirst);
  auto fin = server.handleClientFinal(kRfcClientFinal);
  ASSERT_TRUE(fin) << fin.error();
  EXPECT_EQ(*fin, kRfcServerFinal);
  EXPECT_TRUE(server.succeeded());
}

TEST(Scram, ClientRejectsWrongServerSignature) {
  ScramClient client("user", "pencil");
  client.setNonceForTest(std::string(kRfcClientNonce));
  (void)client.clientFirst();
  ASSERT_TRUE(client.handleServerFirst(kRfcServerFirst));
  EXPECT_FALSE(client.verifyServerFinal("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").ok());
}

TEST(Scram, ClientTreatsServerErrorAsFailure) {
  ScramClient client("user", "pencil");
  client.setNonceForTest(std::string(kRfcClientNonce));
  (void)client.clientFirst();
  ASSERT_TRUE(client.handleServerFirst(kRfcServerFirst));
  EXPECT_FALSE(client.verifyServerFinal("e=invalid-proof").ok());
}

TEST(Scram, VerifierMatchesPostgresFormat) {
  auto pg = parseScramVerifier(kPostgresVerifier);
  ASSERT_TRUE(pg) << pg.error();
  EXPECT_EQ(pg->iterations, 4096);
  EXPECT_EQ(pg->salt.size(), 16u);
  EXPECT_EQ(pg->stored_key.size(), 32u);
  EXPECT_EQ(pg->server_key.size(), 32u);
  // Same password and salt give byte-for-byte what PostgreSQL stored.
  EXPECT_EQ(makeScramVerifierWithSalt("pencil", pg->salt, pg->iterations), kPostgresVerifier);
  EXPECT_NE(makeScramVerifierWithSalt("pencil!", pg->salt, pg->iterations), kPostgresVerifier);
}

TEST(Scram, PostgresVerifierEndToEnd) {
  EXPECT_TRUE(runExchange(std::string(kPostgresVerifier), "pencil"));
  EXPECT_FALSE(runExchange(std::string(kPostgresVerifier), "Pencil"));
  EXPECT_FALSE(runExchange(std::string(kPostgresVerifier), ""));
}

TEST(Scram, RandomSaltVerifier) {
  const std::string a = makeScramVerifier("s3cret");
  const std::string b = makeScramVerifier("s3cret");
  EXPECT_NE(a, b) << "salt must be random";
  auto v = parseScramVerifier(a);
  ASSERT_TRUE(v) << v.error();
  EXPECT_EQ(v->iterations, 4096);
  EXPECT_EQ(v->salt.size(), 16u);
  EXPECT_EQ(a.rfind("SCRAM-SHA-256$4096:", 0), 0u);
  auto custom = parseScramVerifier(makeScramVerifier("x", 10000));
  ASSERT_TRUE(custom);
  EXPECT_EQ(custom->iterations, 10000);
}

TEST(Scram, EndToEndRightAndWrongPassword) {
  const std::string verifier = makeScramVerifier("correct horse battery staple");
  EXPECT_TRUE(runExchange(verifier, "correct horse battery staple"));
  EXPECT_FALSE(runExchange(verifier, "correct horse battery stapl"));
  EXPECT_FALSE(runExchange(verifier, "wrong"));
}

TEST(Scram, WrongPasswordFailsAtTheServerWithoutSayingWhy) {
  auto verifier = parseScramVerifier(makeScramVerifier("right"));
  ASSERT_TRUE(verifier);
  ScramServer server(*verifier);
  ScramClient client("", "wrong");
  auto sf = server.handleClientFirst(client.clientFirst());
  ASSERT_TRUE(sf);
  auto cf = client.handleServerFirst(*sf);
  ASSERT_TRUE(cf);
  auto fin = server.handleClientFinal(*cf);
  ASSERT_FALSE(fin);
  EXPECT_FALSE(server.succeeded());
  // The server's reason names no key material.
  EXPECT_EQ(fin.error().find(verifier->stored_key), std::string::npos);
}

TEST(Scram, UsernameInClientFirstIsIgnored) {
  auto verifier = parseScramVerifier(rfcVerifier());
  ASSERT_TRUE(verifier);
  for (const char* user : {"user", "", "someone=2Celse"}) {
    ScramServer server(*verifier);
    std::string first = std::string("n,,n=") + user + ",r=abc";
    EXPECT_TRUE(server.handleClientFirst(first)) << user;
  }
  // The client escapes ',' and '=' in the name it sends.
  ScramClient client("a,b=c", "pw");
  client.setNonceForTest("xyz");
  EXPECT_EQ(client.clientFirst(), "n,,n=a=2Cb=3Dc,r=xyz");
}

TEST(Scram, ChannelBindingFlagY) {
  // 'y': the client could bind but thinks we cannot; then c= must carry "y,," (eSws).
  auto verifier = parseScramVerifier(rfcVerifier());
  ASSERT_TRUE(verifier);
  ScramServer server(*verifier);
  server.setNonceForTest(std::string(kRfcServerNonce));
  ASSERT_TRUE(server.handleClientFirst("y,,n=user,r=rOprNGfwEbeRWgbNEkqO"));
  // The RFC's final message carries c=biws ("n,,"), which no longer matches.
  EXPECT_FALSE(server.handleClientFinal(kRfcClientFinal));
}

TEST(Scram, MalformedClientFirstRejected) {
  auto verifier = parseScramVerifier(rfcVerifier());
  ASSERT_TRUE(verifier);
  const std::vector<std::string> bad = {
      "",
      "n",
      "n,",
      "n,,",
      "p=tls-server-end-point,,n=,r=abc",  // channel binding we never advertised
      "x,,n=,r=abc",
      "n,a=admin,n=,r=abc",  // authzid
      "n;,n=,r=abc",
      "n,,m=ext,n=,r=abc",  // mandatory extension
      "n,,r=abc",           // no username attribute
      "n,,n=,",
      "n,,n=,r=",  // empty nonce
      "n,,n=,r=ab\x01"
      "c",                               // unprintable nonce
      std::string("n,,n=,r=ab\0c", 12),  // NUL in nonce
      "n,,n=,r=abc\x7f",
      "n,,n=,r=abc,",     // dangling comma
      "n,,n=,r=abc,x",    // extension without '='
      "n,,n=,r=abc,1=2",  // attribute names are letters
      "n,,n=,s=abc",
      "n,,n=",
  };
  for (const auto& m : bad) {
    ScramServer server(*verifier);
    EXPECT_FALSE(server.handleClientFirst(m)) << m;
    // A failed exchange stays failed.
    EXPECT_FALSE(server.handleClientFinal(kRfcClientFinal)) << m;
  }
  ScramServer ok(*verifier);
  EXPECT_TRUE(ok.handleClientFirst("n,,n=,r=abc,x=extension"));
}

TEST(Scram, MalformedClientFinalRejected) {
  auto verifier = parseScramVerifier(rfcVerifier());
  ASSERT_TRUE(verifier);
  const std::string nonce = std::string(kRfcClientNonce) + std::string(kRfcServerNonce);
  const std::string proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
  const std::vector<std::string> bad = {
      "",
      "c=biws",
      "c=biws,r=" + nonce,                // no proof
      "r=" + nonce + "," + proof,         // no channel binding
      "c=eSws,r=" + nonce + "," + proof,  // "y,," but first said "n,,"
      "c=cD10bHMtc2VydmVyLWVuZC1wb2ludCws,r=" + nonce + "," + proof,
      "c=biws,r=" + std::string(kRfcClientNonce) + "," + proof,  // server part missing
      "c=biws,r=" + nonce + "X," + proof,                        // wrong nonce
      "c=biws,r=" + nonce + ",p=!!!!",                           // bad base64
      "c=biws,r=" + nonce + ",p=dHzbZapWIk4jUhN",                // unpadded base64
      "c=biws,r=" + nonce + ",p=AAAA",                           // proof of the wrong size
      "c=biws,r=" + nonce + ",p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",  // wrong proof
      "c=biws,r=" + nonce + "," + proof + ",x=1",  // garbage after proof
      "c=biws,r=" + nonce + "," + proof + ",",
      "c=bi ws,r=" + nonce + "," + proof,
      "c=biws,,r=" + nonce + "," + proof,
      "c=biws,r=" + nonce + ",x=ext," + proof,  // extension changes the proof
  };
  for (const auto& m : bad) {
    ScramServer server(*verifier);
    server.setNonceForTest(std::string(kRfcServerNonce));
    ASSERT_TRUE(server.handleClientFirst(kRfcClientFirst));
    EXPECT_FALSE(server.handleClientFinal(m)) << m;
    EXPECT_FALSE(server.succeeded()) << m;
  }
}

TEST(Scram, StepsOutOfOrderFail) {
  auto verifier = parseScramVerifier(rfcVerifier());
  ASSERT_TRUE(verifier);
  ScramServer server(*verifier);
  EXPECT_FALSE(server.handleClientFinal(kRfcClientFinal));  // final before first

  ScramServer twice(*verifier);
  twice.setNonceForTest(std::string(kRfcServerNonce));
  ASSERT_TRUE(twice.handleClientFirst(kRfcClientFirst));
  EXPECT_FALSE(twice.handleClientFirst(kRfcClientFirst));  // first twice ends the exchange
  EXPECT_FALSE(twice.handleClientFinal(kRfcClientFinal));

  ScramServer replay(*verifier);
  replay.setNonceForTest(std::string(kRfcServerNonce));
  ASSERT_TRUE(replay.handleClientFirst(kRfcClientFirst));
  ASSERT_TRUE(replay.handleClientFinal(kRfcClientFinal));
  EXPECT_FALSE(replay.handleClientFinal(kRfcClientFinal));  // no second final

  ScramClient client("user", "pencil");
  EXPECT_FALSE(client.handleServerFirst(kRfcServerFirst));  // before clientFirst
  EXPECT_FALSE(client.verifyServerFinal(kRfcServerFinal).ok());
}

TEST(Scram, ServerNoncesAreFreshAndPrintable) {
  auto verifier = parseScramVerifier(rfcVerifier());
  ASSERT_TRUE(verifier);
  ScramServer a(*verifier), b(*verifier);
  auto fa = a.handleClientFirst("n,,n=,r=abc");
  auto fb = b.handleClientFirst("n,,n=,r=abc");
  ASSERT_TRUE(fa && fb);
  EXPECT_NE(*fa, *fb);
  const std::string nonce = fa->substr(2, fa->find(',') - 2);
  EXPECT_EQ(nonce.rfind("abc", 0), 0u);
  EXPECT_EQ(nonce.size(), 3u + 24u);  // 18 random bytes in base64, as PostgreSQL
  EXPECT_NE(fa->find(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"), std::string::npos);
}

TEST(Scram, MalformedServerFirstRejectedByClient) {
  const std::vector<std::string> bad = {
      "",
      "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  // no server part
      "r=somebodyelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",       // not our nonce
      "r=rOprNGfwEbeRWgbNEkqOabc,i=4096",                          // no salt
      "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==",      // no iterations
      "r=rOprNGfwEbeRWgbNEkqOabc,s=,i=4096",                       // empty salt
      "r=rOprNGfwEbeRWgbNEkqOabc,s=@@@@,i=4096",                   // bad base64
      "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0",
      "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-1",
      "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4k",
      "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999",
      "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=2000000",  // above the cap
      "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,x=1",
      "m=ext,r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
      "s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOabc,i=4096",
  };
  for (const auto& m : bad) {
    ScramClient client("user", "pencil");
    client.setNonceForTest(std::string(kRfcClientNonce));
    (void)client.clientFirst();
    EXPECT_FALSE(client.handleServerFirst(m)) << m;
    EXPECT_FALSE(client.verifyServerFinal(kRfcServerFinal).ok()) << m;
  }
}

TEST(Scram, ClientNonceIsRandom) {
  ScramClient a("", "x"), b("", "x");
  const std::string fa = a.clientFirst(), fb = b.clientFirst();
  EXPECT_NE(fa, fb);
  EXPECT_EQ(fa.rfind("n,,n=,r=", 0), 0u);  // what libpq sends with an empty user
  EXPECT_EQ(fa.size(), 8u + 24u);
}

TEST(Scram, BadVerifiersRejected) {
  const std::string salt = "W22ZaJ0SNY7soEsUEjb6gQ==";
  const std::string key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
  EXPECT_TRUE(parseScramVerifier("SCRAM-SHA-256$4096:" + salt + "$" + key + ":" + key));
  const std::vector<std::string> bad = {
      "",
      "SCRAM-SHA-256$",
      "md5a3556571e93b0d20722ba62be61e8c2d",
      "SCRAM-SHA-1$4096:" + salt + "$" + key + ":" + key,
      "SCRAM-SHA-256$0:" + salt + "$" + key + ":" + key,
      "SCRAM-SHA-256$-1:" + salt + "$" + key + ":" + key,
      "SCRAM-SHA-256$abc:" + salt + "$" + key + ":" + key,
      "SCRAM-SHA-256$99999999999:" + salt + "$" + key + ":" + key,
      "SCRAM-SHA-256$4096:$" + key + ":" + key,
      "SCRAM-SHA-256$4096:" + salt + "$" + key,
      "SCRAM-SHA-256$4096:" + salt + "$AAAA:" + key,
      "SCRAM-SHA-256$4096:" + salt + "$" + key + ":" + key + "A",
      "SCRAM-SHA-256$4096:" + salt + ":" + key + ":" + key,
      "SCRAM-SHA-256$4096:not*base64$" + key + ":" + key,
      "SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0c2FsdA==$REPLACE_ME:REPLACE_ME",
  };
  for (const auto& v : bad) EXPECT_FALSE(parseScramVerifier(v)) << v;
  EXPECT_EQ(makeScramVerifierWithSalt("pw", "", 4096), "");
  EXPECT_EQ(makeScramVerifierWithSalt("pw", "salt", 0), "");
}

TEST(Scram, MockVerifierFailsLikeAWrongPassword) {
  const ScramVerifier a = mockScramVerifier("ghost", "process-secret");
  const ScramVerifier b = mockScramVerifier("ghost", "process-secret");
  const ScramVerifier c = mockScramVerifier("other", "process-secret");
  EXPECT_EQ(a.salt, b.salt);  // stable for a user
  EXPECT_NE(a.salt, c.salt);
  EXPECT_EQ(a.salt.size(), 16u);
  EXPECT_EQ(a.iterations, 4096);
  ScramServer server(a);
  ScramClient client("", "anything");
  auto sf = server.handleClientFirst(client.clientFirst());
  ASSERT_TRUE(sf);
  auto cf = client.handleServerFirst(*sf);
  ASSERT_TRUE(cf);
  EXPECT_FALSE(server.handleClientFinal(*cf));
}

TEST(Scram, MockVerifierTakesTheRealUsersShape) {
  const ScramVerifier v = mockScramVerifier("ghost", "a-key-that-persists", 10000, 20);
  EXPECT_EQ(v.iterations, 10000);
  EXPECT_EQ(v.salt.size(), 20u);
  EXPECT_EQ(mockScramVerifier("ghost", "a-key-that-persists", 10000, 20).salt, v.salt);
  // Another key (another installation) gives another salt for the same name.
  EXPECT_NE(mockScramVerifier("ghost", "another-key", 10000, 20).salt, v.salt);
  // Nonsense shapes fall back to PostgreSQL's.
  const ScramVerifier d = mockScramVerifier("ghost", "k", 0, 99);
  EXPECT_EQ(d.iterations, 4096);
  EXPECT_EQ(d.salt.size(), 16u);
}

// ------------------------------------------------------------------ md5

TEST(Md5, KnownDigests) {
  // Expected values from `echo -n ... | md5sum`.
  EXPECT_EQ(md5Hash(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5Hash("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5Hash("md5user"), "f4b96c24785053ec563b3db27eb2ed13");
}

TEST(Md5, Verifier) {
  // md5("secret" + "md5user"); PostgreSQL 15 stored the same for CREATE ROLE md5user
  // PASSWORD 'secret' with password_encryption=md5.
  EXPECT_EQ(md5Verifier("md5user", "secret"), "md52aea419619857e8a27f0f7aa641db0c6");
  EXPECT_EQ(md5Verifier("alice", "pencil"), "md5" + md5Hash("pencilalice"));
  EXPECT_EQ(md5Hash("pencilalice"), "ee69efad287c7423caf0b3229d71f567");
}

TEST(Md5, SaltedResponse) {
  // printf '2aea419619857e8a27f0f7aa641db0c6\x01\x02\x03\x04' | md5sum
  const uint8_t salt1[4] = {0x01, 0x02, 0x03, 0x04};
  const uint8_t salt2[4] = {0xde, 0xad, 0xbe, 0xef};
  EXPECT_EQ(md5Response("md52aea419619857e8a27f0f7aa641db0c6", salt1),
            "md56b614f1bd5dc8478f5705c783c9bbdc0");
  EXPECT_EQ(md5Response("md52aea419619857e8a27f0f7aa641db0c6", salt2),
            "md5cd861fedfd4a6ff1adf08b190b2b4e47");
  // The stored hash may also be given without its prefix.
  EXPECT_EQ(md5Response("2aea419619857e8a27f0f7aa641db0c6", salt1),
            "md56b614f1bd5dc8478f5705c783c9bbdc0");
  EXPECT_EQ(md5PasswordResponse("md5user", "secret", salt1), "md56b614f1bd5dc8478f5705c783c9bbdc0");
  EXPECT_NE(md5PasswordResponse("md5user", "Secret", salt1), "md56b614f1bd5dc8478f5705c783c9bbdc0");
}

// ------------------------------------------------------------------ primitives

TEST(Base64, Rfc4648Vectors) {
  const std::vector<std::pair<std::string, std::string>> v = {{"", ""},
                                                              {"f", "Zg=="},
                                                              {"fo", "Zm8="},
                                                              {"foo", "Zm9v"},
                                                              {"foob", "Zm9vYg=="},
                                                              {"fooba", "Zm9vYmE="},
                                                              {"foobar", "Zm9vYmFy"}};
  for (const auto& [raw, enc] : v) {
    EXPECT_EQ(base64Encode(raw), enc);
    auto d = base64Decode(enc);
    ASSERT_TRUE(d) << enc;
    EXPECT_EQ(*d, raw);
  }
  const std::string bin("\x00\xff\x10\x80", 4);
  EXPECT_EQ(*base64Decode(base64Encode(bin)), bin);
}

TEST(Base64, StrictDecoding) {
  for (const char* bad : {"Zg=", "Zg", "Z===", "====", "Zm9v\n", "Zm=v",
                          "Zm9v====", "Zg==Zg==", "Zh==", "Zm9=", "!!!!", "Zm 9"}) {
    EXPECT_FALSE(base64Decode(bad)) << bad;
  }
}

TEST(Crypto, ConstantTimeEquals) {
  EXPECT_TRUE(constantTimeEquals("", ""));
  EXPECT_TRUE(constantTimeEquals("abc", "abc"));
  EXPECT_FALSE(constantTimeEquals("abc", "abd"));
  EXPECT_FALSE(constantTimeEquals("abc", "ab"));
}

TEST(Crypto, RandomBytes) {
  EXPECT_EQ(randomBytes(0).size(), 0u);
  const std::string a = randomBytes(32), b = randomBytes(32);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace pgwarden::protocol
