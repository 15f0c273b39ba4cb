// TlsEngine pairs joined in memory: handshakes, data both ways (whole, byte by byte), host and
// CA verification, client certificates, hostile input, close_notify; and the strict parsing of
// the `tls:` and `upstream.ssl*` keys. Certificates are made here with OpenSSL for each run.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/config_util.h"
#include "net/tls.h"

namespace pgwarden::daemon {
namespace {

namespace fs = std::filesystem;

struct KeyCert {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
};

void addExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(ext, nullptr);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// An EC P-256 key and a certificate for `cn`, signed by `issuer` (self-signed when null).
KeyCert makeCert(const std::string& cn, const char* san, const KeyCert* issuer, bool ca) {
  static long serial = 1;
  KeyCert kc;
  kc.key = EVP_EC_gen("P-256");
  kc.cert = X509_new();
  X509_set_version(kc.cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(kc.cert), serial++);
  X509_gmtime_adj(X509_getm_notBefore(kc.cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(kc.cert), 3600);
  X509_set_pubkey(kc.cert, kc.key);
  X509_NAME* name = X509_get_subject_name(kc.cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* issuer_cert = issuer ? issuer->cert : kc.cert;
  X509_set_issuer_name(kc.cert, X509_get_subject_name(issuer_cert));
  if (ca) {
    addExt(kc.cert, issuer_cert, NID_basic_constraints, "critical,CA:TRUE");
    addExt(kc.cert, issuer_cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    addExt(kc.cert, issuer_cert, NID_basic_constraints, "CA:FALSE");
  }
  if (san != nullptr) addExt(kc.cert, issuer_cert, NID_subject_alt_name, san);
  X509_sign(kc.cert, issuer ? issuer->key : kc.key, EVP_sha256());
  return kc;
}

void writePem(const fs::path& p, const KeyCert& kc, bool key) {
  FILE* f = std::fopen(p.c_str(), "w");
  ASSERT_NE(f, nullptr);
  if (key) {
    PEM_write_PrivateKey(f, kc.key, nullptr, nullptr, 0, nullptr, nullptr);
  } else {
    PEM_write_X509(f, kc.cert);
  }
  std::fclose(f);
}

class TlsEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/pgwarden-tls-XXXXXX";
    dir_ = new fs::path(mkdtemp(tmpl));
    KeyCert ca = makeCert("pgwarden test CA", nullptr, nullptr, true);
    KeyCert other_ca = makeCert("another CA", nullptr, nullptr, true);
    KeyCert server = makeCert("localhost", "DNS:localhost,IP:127.0.0.1", &ca, false);
    KeyCert client = makeCert("alice", nullptr, &ca, false);
    KeyCert stranger = makeCert("mallory", nullptr, &other_ca, false);
    writePem(p("ca.crt"), ca, false);
    writePem(p("other-ca.crt"), other_ca, false);
    writePem(p("server.crt"), server, false);
    writePem(p("server.key"), server, true);
    writePem(p("client.crt"), client, false);
    writePem(p("client.key"), client, true);
    writePem(p("stranger.crt"), stranger, false);
    writePem(p("stranger.key"), stranger, true);
    for (auto* kc : {&ca, &other_ca, &server, &client, &stranger}) {
      EVP_PKEY_free(kc->key);
      X509_free(kc->cert);
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string p(const char* name) { return (*dir_ / name).string(); }

  std::shared_ptr<const net::TlsContext> serverCtx(const std::string& ca = "",
                                                   bool require = false) {
    auto r = net::TlsContext::makeServer(p("server.crt"), p("server.key"), ca, require);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
    return r.ok() ? r.value() : nullptr;
  }
  std::shared_ptr<const net::TlsContext> clientCtx(net::UpstreamSslMode m,
                                                   const std::string& root) {
    auto r = net::TlsContext::makeClient(m, root);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
    return r.ok() ? r.value() : nullptr;
  }

  // Moves ciphertext between the two engines until neither has anything to say. Returns false
  // as soon as either side fails.
  static bool pump(net::TlsEngine& c, net::TlsEngine& s, std::string& c_plain, std::string& s_plain,
                   bool byte_by_byte = false) {
    for (int rounds = 0; rounds < 100 && (c.hasOutput() || s.hasOutput()); ++rounds) {
      if (c.hasOutput()) {
        const std::string bytes = c.takeOutput();
        if (!feedAll(s, bytes, s_plain, byte_by_byte)) return false;
      }
      if (s.hasOutput()) {
        const std::string bytes = s.takeOutput();
        if (!feedAll(c, bytes, c_plain, byte_by_byte)) return false;
      }
    }
    return c.state() != net::TlsState::kFailed && s.state() != net::TlsState::kFailed;
  }
  static bool feedAll(net::TlsEngine& e, const std::string& bytes, std::string& plain, bool one) {
    if (!one) return e.feed(bytes.data(), bytes.size(), plain).ok();
    for (char ch : bytes) {
      if (!e.feed(&ch, 1, plain).ok()) return false;
    }
    return true;
  }

  static fs::path* dir_;
};

fs::path* TlsEngineTest::dir_ = nullptr;

TEST_F(TlsEngineTest, VerifyFullHandshakeAndDataBothWays) {
  auto s = net::TlsEngine::makeServer(serverCtx());
  auto c = net::TlsEngine::makeClient(clientCtx(net::UpstreamSslMode::kVerifyFull, p("ca.crt")),
                                      "localhost");
  ASSERT_TRUE(s.ok() && c.ok());
  EXPECT_TRUE((*c)->hasOutput());  // ClientHello at once
  std::string cp, sp;
  ASSERT_TRUE(pump(**c, **s, cp, sp)) << (*c)->error() << " / " << (*s)->error();
  EXPECT_TRUE((*c)->established());
  EXPECT_TRUE((*s)->established());
  EXPECT_EQ((*c)->describe().rfind("TLSv1.3 ", 0), 0u) << (*c)->describe();

  ASSERT_TRUE((*c)->write("startup packet").ok());
  ASSERT_TRUE((*s)->write(std::string(100000, 'x')).ok());  // spans several records
  ASSERT_TRUE(pump(**c, **s, cp, sp));
  EXPECT_EQ(sp, "startup packet");
  EXPECT_EQ(cp, std::string(100000, 'x'));
}

TEST_F(TlsEngineTest, ByteByByteDeliveryGivesTheSameBytes) {
  auto s = net::TlsEngine::makeServer(serverCtx());
  auto c = net::TlsEngine::makeClient(clientCtx(net::UpstreamSslMode::kVerifyFull, p("ca.crt")),
                                      "127.0.0.1");
  ASSERT_TRUE(s.ok() && c.ok());
  std::string cp, sp;
  ASSERT_TRUE(pump(**c, **s, cp, sp, true)) << (*c)->error() << " / " << (*s)->error();
  ASSERT_TRUE((*c)->write("hello").ok());
  ASSERT_TRUE((*c)->write(" world").ok());
  ASSERT_TRUE(pump(**c, **s, cp, sp, true));
  EXPECT_EQ(sp, "hello world");
}

TEST_F(TlsEngineTest, WritesBeforeTheHandshakeEndsAreHeldThenSent) {
  auto s = net::TlsEngine::makeServer(serverCtx());
  auto c = net::TlsEngine::makeClient(clientCtx(net::UpstreamSslMode::kRequire, ""), "localhost");
  ASSERT_TRUE(s.ok() && c.ok());
  const std::string hello = (*c)->takeOutput();
  ASSERT_TRUE((*c)->write("early").ok());
  EXPECT_FALSE((*c)->hasOutput());  // nothing in clear, nothing yet
  std::string cp, sp;
  ASSERT_TRUE((*s)->feed(hello.data(), hello.size(), sp).ok());
  ASSERT_TRUE(pump(**c, **s, cp, sp));
  EXPECT_EQ(sp, "early");
}

TEST_F(TlsEngineTest, VerifyFullRefusesAnotherHostName) {
  auto s = net::TlsEngine::makeServer(serverCtx());
  auto c = net::TlsEngine::makeClient(clientCtx(net::UpstreamSslMode::kVerifyFull, p("ca.crt")),
                                      "db.example.com");
  ASSERT_TRUE(s.ok() && c.ok());
  std::string cp, sp;
  EXPECT_FALSE(pump(**c, **s, cp, sp));
  EXPECT_EQ((*c)->state(), net::TlsState::kFailed);
  EXPECT_NE((*c)->error().find("hostname mismatch"), std::string::npos) << (*c)->error();
}

TEST_F(TlsEngineTest, VerifyCaIgnoresTheNameButNotTheIssuer) {
  {
    auto s = net::TlsEngine::makeServer(serverCtx());
    auto c = net::TlsEngine::makeClient(clientCtx(net::UpstreamSslMode::kVerifyCa, p("ca.crt")),
                                        "db.example.com");
    ASSERT_TRUE(s.ok() && c.ok());
    std::string cp, sp;
    EXPECT_TRUE(pump(**c, **s, cp, sp)) << (*c)->error();
  }
  auto s = net::TlsEngine::makeServer(serverCtx());
  auto c = net::TlsEngine::makeClient(clientCtx(net::UpstreamSslMode::kVerifyCa, p("other-ca.crt")),
                                      "localhost");
  ASSERT_TRUE(s.ok() && c.ok());
  std::string cp, sp;
  EXPECT_FALSE(pump(**c, **s, cp, sp));
  EXPECT_NE((*c)->error().find("certificate verify failed"), std::string::npos) << (*c)->error();
}

TEST_F(TlsEngineTest, RequireWithoutRootEncryptsWithoutVerifying) {
  auto ctx = clientCtx(net::UpstreamSslMode::kRequire, "");
  EXPECT_FALSE(ctx->verifiesPeer());
  auto s = net::TlsEngine::makeServer(serverCtx());
  auto c = net::TlsEngine::makeClient(ctx, "db.example.com");
  ASSERT_TRUE(s.ok() && c.ok());
  std::string cp, sp;
  EXPECT_TRUE(pump(**c, **s, cp, sp)) << (*c)->error();
  // libpq: with a root certificate, require verifies the issuer like verify-ca.
  EXPECT_TRUE(clientCtx(net::UpstreamSslMode::kRequire, p("ca.crt"))->verifiesPeer());
  EXPECT_FALSE(net::TlsContext::makeClient(net::UpstreamSslMode::kVerifyFull, "").ok());
}

TEST_F(TlsEngineTest, ClientCertificateVerifiedWhenCaConfigured) {
  auto sctx = serverCtx(p("ca.crt"), true);
  ASSERT_TRUE(sctx->verifiesPeer());
  auto withCert = [&](const char* crt, const char* key) {
    auto cctx = clientCtx(net::UpstreamSslMode::kVerifyFull, p("ca.crt"));
    EXPECT_EQ(SSL_CTX_use_certificate_file(cctx->get(), p(crt).c_str(), SSL_FILETYPE_PEM), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(cctx->get(), p(key).c_str(), SSL_FILETYPE_PEM), 1);
    return cctx;
  };
  {
    auto s = net::TlsEngine::makeServer(sctx);
    auto c = net::TlsEngine::makeClient(withCert("client.crt", "client.key"), "localhost");
    ASSERT_TRUE(s.ok() && c.ok());
    std::string cp, sp;
    ASSERT_TRUE(pump(**c, **s, cp, sp)) << (*c)->error() << " / " << (*s)->error();
    // TLS 1.3: the server checks the certificate on the client's Finished; send data to see it.
    ASSERT_TRUE((*c)->write("x").ok());
    ASSERT_TRUE(pump(**c, **s, cp, sp));
    EXPECT_EQ(sp, "x");
    EXPECT_NE((*s)->peerSubject().find("CN=alice"), std::string::npos) << (*s)->peerSubject();
  }
  for (const bool stranger : {true, false}) {
    auto s = net::TlsEngine::makeServer(sctx);
    auto cctx = stranger ? withCert("stranger.crt", "stranger.key")
                         : clientCtx(net::UpstreamSslMode::kVerifyFull, p("ca.crt"));
    auto c = net::TlsEngine::makeClient(cctx, "localhost");
    ASSERT_TRUE(s.ok() && c.ok());
    std::string cp, sp;
    (void)pump(**c, **s, cp, sp);
    (void)(*c)->write("x");
    EXPECT_FALSE(pump(**c, **s, cp, sp)) << "stranger=" << stranger;
    EXPECT_EQ((*s)->state(), net::TlsState::kFailed);
    EXPECT_TRUE(sp.empty());
  }
}

TEST_F(TlsEngineTest, PlaintextStartupWhereAHandshakeBelongsFails) {
  auto s = net::TlsEngine::makeServer(serverCtx());
  ASSERT_TRUE(s.ok());
  // A StartupMessage in clear (length 8 + "user\0x\0\0"), as an injected pipelined packet would be.
  const std::string startup("\0\0\0\x11\0\x03\0\0user\0x\0\0", 17);
  std::string plain;
  EXPECT_FALSE((*s)->feed(startup.data(), startup.size(), plain).ok());
  EXPECT_EQ((*s)->state(), net::TlsState::kFailed);
  EXPECT_TRUE(plain.empty());
  EXPECT_FALSE((*s)->write("after failure").ok());
}

TEST_F(TlsEngineTest, RandomBytesNeverCrashAndNeverYieldPlaintext) {
  std::srand(7);
  for (int i = 0; i < 200; ++i) {
    auto s = net::TlsEngine::makeServer(serverCtx());
    ASSERT_TRUE(s.ok());
    std::string junk(static_cast<size_t>(1 + std::rand() % 600), '\0');
    for (auto& ch : junk) ch = static_cast<char>(std::rand());
    if (i % 2 == 0) junk[0] = 0x16;  // looks like a handshake record
    std::string plain;
    (void)(*s)->feed(junk.data(), junk.size(), plain);
    EXPECT_TRUE(plain.empty());
    EXPECT_FALSE((*s)->established());
  }
}

TEST_F(TlsEngineTest, OldProtocolVersionsAreRefused) {
  auto cctx = clientCtx(net::UpstreamSslMode::kRequire, "");
  SSL_CTX_set_min_proto_version(cctx->get(), TLS1_VERSION);
  SSL_CTX_set_max_proto_version(cctx->get(), TLS1_1_VERSION);
  SSL_CTX_set_security_level(cctx->get(), 0);
  SSL_CTX_set_cipher_list(cctx->get(), "DEFAULT:@SECLEVEL=0");
  auto s = net::TlsEngine::makeServer(serverCtx());
  auto c = net::TlsEngine::makeClient(cctx, "localhost");
  ASSERT_TRUE(s.ok() && c.ok());
  std::string cp, sp;
  EXPECT_FALSE(pump(**c, **s, cp, sp));
  EXPECT_FALSE((*s)->established());
}

TEST_F(TlsEngineTest, CloseNotifyEndsThePeer) {
  auto s = net::TlsEngine::makeServer(serverCtx());
  auto c = net::TlsEngine::makeClient(clientCtx(net::UpstreamSslMode::kVerifyFull, p("ca.crt")),
                                      "localhost");
  ASSERT_TRUE(s.ok() && c.ok());
  std::string cp, sp;
  ASSERT_TRUE(pump(**c, **s, cp, sp));
  ASSERT_TRUE((*s)->write("bye").ok());
  (*s)->shutdown();
  ASSERT_TRUE(pump(**c, **s, cp, sp));
  EXPECT_EQ(cp, "bye");
  EXPECT_EQ((*c)->state(), net::TlsState::kClosed);
}

TEST_F(TlsEngineTest, ServerContextRejectsAKeyThatDoesNotMatch) {
  auto r = net::TlsContext::makeServer(p("server.crt"), p("client.key"), "", false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("mismatch"), std::string::npos) << r.error();
  EXPECT_FALSE(net::TlsContext::makeServer(p("nope.crt"), p("server.key"), "", false).ok());
}

// --- config ---------------------------------------------------------------------------------

std::string configError(const std::string& yaml, bool upstream) {
  try {
    const YAML::Node n = YAML::Load(yaml);
    if (upstream) {
      (void)net::parseUpstreamTls(n, "/etc/pgwarden/pgwarden.yaml");
    } else {
      (void)net::parseTlsConfig(n, "/etc/pgwarden/pgwarden.yaml");
    }
  } catch (const config::ConfigError& e) {
    return e.key() + ": " + e.what();
  }
  return "";
}

TEST_F(TlsEngineTest, ConfigDefaultsAndStrictKeys) {
  const net::TlsConfig none = net::parseTlsConfig(YAML::Node(), "x.yaml");
  EXPECT_EQ(none.mode, net::TlsMode::kDisable);
  EXPECT_FALSE(none.enabled());

  const net::TlsConfig with_cert = net::parseTlsConfig(
      YAML::Load("cert_file: " + p("server.crt") + "\nkey_file: " + p("server.key")), "x.yaml");
  EXPECT_EQ(with_cert.mode, net::TlsMode::kAllow);  // a certificate turns TLS on
  EXPECT_TRUE(with_cert.enabled());

  EXPECT_NE(configError("certfile: a.crt", false).find("tls.certfile"), std::string::npos);
  EXPECT_NE(configError("mode: require", false).find("needs cert_file"), std::string::npos);
  EXPECT_NE(configError("mode: prefer\ncert_file: " + p("server.crt") + "\nkey_file: " +
                            p("server.key"),
                        false)
                .find("expected disable, allow or require"),
            std::string::npos);
  EXPECT_NE(configError("cert_file: /nonexistent.crt\nkey_file: " + p("server.key"), false)
                .find("cannot read /nonexistent.crt"),
            std::string::npos);
  EXPECT_NE(configError("cert_file: " + p("server.crt") + "\nkey_file: " + p("client.key"), false)
                .find("mismatch"),
            std::string::npos);
}

TEST_F(TlsEngineTest, ConfigFilesMustBeRegularFiles) {
  // OpenSSL would block opening a FIFO with no writer, and a device is no certificate.
  const std::string fifo = p("fifo.crt");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(configError("cert_file: " + fifo + "\nkey_file: " + p("server.key"), false)
                .find("tls.cert_file: " + fifo + " is not a regular file"),
            std::string::npos);
  EXPECT_NE(configError("cert_file: " + p("server.crt") + "\nkey_file: /dev/zero", false)
                .find("is not a regular file"),
            std::string::npos);
  EXPECT_NE(configError("host: x\nsslmode: verify-full\nsslrootcert: " + fifo, true)
                .find("upstream.sslrootcert: " + fifo + " is not a regular file"),
            std::string::npos);
  ::unlink(fifo.c_str());
}

TEST_F(TlsEngineTest, UpstreamSslModeConfig) {
  EXPECT_EQ(net::parseUpstreamTls(YAML::Load("host: x"), "x.yaml").sslmode,
            net::UpstreamSslMode::kDisable);
  const auto full = net::parseUpstreamTls(
      YAML::Load("sslmode: verify-full\nsslrootcert: " + p("ca.crt")), "x.yaml");
  EXPECT_EQ(full.sslmode, net::UpstreamSslMode::kVerifyFull);
  ASSERT_NE(full.context, nullptr);
  EXPECT_TRUE(full.context->verifiesHost());
  EXPECT_NE(configError("sslmode: verify-ca", true).find("needs upstream.sslrootcert"),
            std::string::npos);
  EXPECT_NE(configError("sslmode: allow", true).find("upstream.sslmode"), std::string::npos);
}

}  // namespace
}  // namespace pgwarden::daemon
