// TlsContext and TlsEngine over OpenSSL memory BIOs, and the strict parsing of the `tls:` and
// `upstream.ssl*` config keys. The engine is pure computation over byte buffers, so the unit
// tests drive a client and a server engine against each other with no socket at all.
#include "net/tls.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <unistd.h>

#include <array>

#include "common/config_util.h"

namespace pgwarden::net {

namespace cfg = pgwarden::config;

namespace {

// TLS 1.2 suites with forward secrecy and AEAD only (TLS 1.3 suites are all modern).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// The OpenSSL error queue as one line, emptied so the next call starts clean.
std::string opensslErrors(const std::string& what) {
  std::string msg = what;
  unsigned long e;  // NOLINT: OpenSSL's type
  bool first = true;
  while ((e = ERR_get_error()) != 0) {
    std::array<char, 256> buf{};
    ERR_error_string_n(e, buf.data(), buf.size());
    msg += first ? ": " : "; ";
    msg += buf.data();
    first = false;
  }
  return msg;
}

bool isIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

SSL_CTX* newContext(bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return nullptr;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Sessions are long-lived and few; tickets would only add records after the handshake.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  return ctx;
}

std::string resolvePath(const std::string& config_path, const std::string& p) {
  if (p.empty() || p.front() == '/') return p;
  const auto slash = config_path.rfind('/');
  if (slash == std::string::npos) return p;
  return config_path.substr(0, slash + 1) + p;
}

std::string requireReadable(const YAML::Node& map, const std::string& key, const char* field,
                            const std::string& config_path) {
  const auto v = cfg::getOptionalString(map, key, field);
  if (!v) return "";
  const std::string path = resolvePath(config_path, *v);
  if (path.empty()) cfg::fail(map[field], key + "." + field, "must not be empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || ::access(path.c_str(), R_OK) != 0) {
    cfg::fail(map[field], key + "." + field, "cannot read " + path);
  }
  // OpenSSL opens it blocking: a FIFO would stall start-up or a reload, a device never end.
  if (!S_ISREG(st.st_mode)) {
    cfg::fail(map[field], key + "." + field, path + " is not a regular file");
  }
  return path;
}

}  // namespace

const char* tlsModeName(TlsMode m) {
  switch (m) {
    case TlsMode::kDisable: return "disable";
    case TlsMode::kAllow: return "allow";
    case TlsMode::kRequire: return "require";
  }
  return "?";
}

const char* upstreamSslModeName(UpstreamSslMode m) {
  switch (m) {
    case UpstreamSslMode::kDisable: return "disable";
    case UpstreamSslMode::kPrefer: return "prefer";
    case UpstreamSslMode::kRequire: return "require";
    case UpstreamSslMode::kVerifyCa: return "verify-ca";
    case UpstreamSslMode::kVerifyFull: return "verify-full";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// TlsContext
// ---------------------------------------------------------------------------------------------

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<const TlsContext>> TlsContext::makeServer(const std::string& cert_file,
                                                                 const std::string& key_file,
                                                                 const std::string& ca_file,
                                                                 bool require_client_cert) {
  ERR_clear_error();
  SSL_CTX* raw = newContext(true);
  if (raw == nullptr) return Error{opensslErrors("cannot create a TLS context")};
  std::shared_ptr<TlsContext> ctx(new TlsContext(raw, true));
  if (SSL_CTX_set_cipher_list(raw, kTls12Ciphers) != 1) {
    return Error{opensslErrors("cannot set the cipher list")};
  }
  if (SSL_CTX_use_certificate_chain_file(raw, cert_file.c_str()) != 1) {
    return Error{opensslErrors("cannot load the certificate " + cert_file)};
  }
  if (SSL_CTX_use_PrivateKey_file(raw, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return Error{opensslErrors("cannot load the private key " + key_file)};
  }
  if (SSL_CTX_check_private_key(raw) != 1) {
    return Error{opensslErrors("the private key does not match the certificate")};
  }
  if (!ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(raw, ca_file.c_str(), nullptr) != 1) {
      return Error{opensslErrors("cannot load the CA file " + ca_file)};
    }
    // Tell clients which CAs we accept, so they pick the right certificate.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_file.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(raw, names);
    SSL_CTX_set_verify(raw,
                       SSL_VERIFY_PEER | (require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                       nullptr);
    ctx->verify_peer_ = true;
  }
  ERR_clear_error();
  return std::shared_ptr<const TlsContext>(std::move(ctx));
}

Result<std::shared_ptr<const TlsContext>> TlsContext::makeClient(UpstreamSslMode mode,
                                                                 const std::string& root_cert) {
  ERR_clear_error();
  SSL_CTX* raw = newContext(false);
  if (raw == nullptr) return Error{opensslErrors("cannot create a TLS context")};
  std::shared_ptr<TlsContext> ctx(new TlsContext(raw, false));
  if (SSL_CTX_set_cipher_list(raw, kTls12Ciphers) != 1) {
    return Error{opensslErrors("cannot set the cipher list")};
  }
  const bool verify = mode == UpstreamSslMode::kVerifyCa || mode == UpstreamSslMode::kVerifyFull ||
                      (mode == UpstreamSslMode::kRequire && !root_cert.empty());
  if (verify) {
    if (root_cert.empty()) {
      return Error{std::string("sslmode ") + upstreamSslModeName(mode) +
                   " needs a root certificate (upstream.sslrootcert)"};
    }
    if (SSL_CTX_load_verify_locations(raw, root_cert.c_str(), nullptr) != 1) {
      return Error{opensslErrors("cannot load the root certificate " + root_cert)};
    }
    SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nullptr);
    ctx->verify_peer_ = true;
    ctx->verify_host_ = mode == UpstreamSslMode::kVerifyFull;
  } else {
    // prefer/require without a root certificate: encryption without authentication (libpq).
    SSL_CTX_set_verify(raw, SSL_VERIFY_NONE, nullptr);
  }
  ERR_clear_error();
  return std::shared_ptr<const TlsContext>(std::move(ctx));
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

TlsConfig parseTlsConfig(const YAML::Node& n, const std::string& config_path) {
  TlsConfig out;
  if (!n.IsDefined() || n.IsNull()) return out;
  cfg::requireMap(n, "tls");
  cfg::checkKeys(n, "tls", {"mode", "cert_file", "key_file", "ca_file", "require_client_cert"});
  out.cert_file = requireReadable(n, "tls", "cert_file", config_path);
  out.key_file = requireReadable(n, "tls", "key_file", config_path);
  out.ca_file = requireReadable(n, "tls", "ca_file", config_path);
  out.require_client_cert = cfg::getBool(n, "tls", "require_client_cert", false);
  if (out.cert_file.empty() != out.key_file.empty()) {
    cfg::fail(n, "tls", "cert_file and key_file go together");
  }
  const bool have_cert = !out.cert_file.empty();
  const std::string mode =
      cfg::getString(n, "tls", "mode", have_cert ? "allow" : "disable");
  if (mode == "disable") {
    out.mode = TlsMode::kDisable;
  } else if (mode == "allow") {
    out.mode = TlsMode::kAllow;
  } else if (mode == "require") {
    out.mode = TlsMode::kRequire;
  } else {
    cfg::fail(n["mode"], "tls.mode", "expected disable, allow or require, got '" + mode + "'");
  }
  if (out.mode != TlsMode::kDisable && !have_cert) {
    cfg::fail(n["mode"], "tls.mode", "mode " + mode + " needs cert_file and key_file");
  }
  if (!out.ca_file.empty() && !have_cert) {
    cfg::fail(n["ca_file"], "tls.ca_file", "client certificates need cert_file and key_file");
  }
  if (out.require_client_cert && out.ca_file.empty()) {
    cfg::fail(n["require_client_cert"], "tls.require_client_cert",
              "needs ca_file to verify client certificates with");
  }
  if (out.mode != TlsMode::kDisable) {
    auto ctx = TlsContext::makeServer(out.cert_file, out.key_file, out.ca_file,
                                      out.require_client_cert);
    if (!ctx.ok()) cfg::fail(n, "tls", ctx.error());
    out.context = std::move(ctx.value());
  }
  return out;
}

UpstreamTlsConfig parseUpstreamTls(const YAML::Node& n, const std::string& config_path) {
  UpstreamTlsConfig out;
  if (!n.IsDefined() || !n.IsMap()) return out;
  const std::string mode = cfg::getString(n, "upstream", "sslmode", "disable");
  if (mode == "disable") {
    out.sslmode = UpstreamSslMode::kDisable;
  } else if (mode == "prefer") {
    out.sslmode = UpstreamSslMode::kPrefer;
  } else if (mode == "require") {
    out.sslmode = UpstreamSslMode::kRequire;
  } else if (mode == "verify-ca") {
    out.sslmode = UpstreamSslMode::kVerifyCa;
  } else if (mode == "verify-full") {
    out.sslmode = UpstreamSslMode::kVerifyFull;
  } else {
    cfg::fail(n["sslmode"], "upstream.sslmode",
              "expected disable, prefer, require, verify-ca or verify-full, got '" + mode + "'");
  }
  out.sslrootcert = requireReadable(n, "upstream", "sslrootcert", config_path);
  if ((out.sslmode == UpstreamSslMode::kVerifyCa || out.sslmode == UpstreamSslMode::kVerifyFull) &&
      out.sslrootcert.empty()) {
    cfg::fail(n["sslmode"], "upstream.sslmode",
              "sslmode " + mode + " needs upstream.sslrootcert (the CA that signed the server)");
  }
  if (out.sslmode != UpstreamSslMode::kDisable) {
    auto ctx = TlsContext::makeClient(out.sslmode, out.sslrootcert);
    if (!ctx.ok()) cfg::fail(n, "upstream.sslmode", ctx.error());
    out.context = std::move(ctx.value());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// TlsEngine
// ---------------------------------------------------------------------------------------------

TlsEngine::TlsEngine(std::shared_ptr<const TlsContext> ctx, SSL* ssl, BIO* in, BIO* out)
    : ctx_(std::move(ctx)), ssl_(ssl), in_(in), out_bio_(out) {}

TlsEngine::~TlsEngine() { SSL_free(ssl_); }  // frees both BIOs

namespace {

// One SSL over two memory BIOs; an empty input BIO reads as "retry", not end of file.
SSL* newSsl(SSL_CTX* ctx, BIO*& in, BIO*& out) {
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return nullptr;
  in = BIO_new(BIO_s_mem());
  out = BIO_new(BIO_s_mem());
  if (in == nullptr || out == nullptr) {
    BIO_free(in);
    BIO_free(out);
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_mem_eof_return(in, -1);
  BIO_set_mem_eof_return(out, -1);
  SSL_set_bio(ssl, in, out);
  return ssl;
}

}  // namespace

Result<std::unique_ptr<TlsEngine>> TlsEngine::makeServer(std::shared_ptr<const TlsContext> ctx) {
  if (!ctx || !ctx->isServer()) return Error{"no server TLS context"};
  ERR_clear_error();
  BIO* in = nullptr;
  BIO* out = nullptr;
  SSL* ssl = newSsl(ctx->get(), in, out);
  if (ssl == nullptr) return Error{opensslErrors("cannot create a TLS session")};
  SSL_set_accept_state(ssl);
  return std::unique_ptr<TlsEngine>(new TlsEngine(std::move(ctx), ssl, in, out));
}

Result<std::unique_ptr<TlsEngine>> TlsEngine::makeClient(std::shared_ptr<const TlsContext> ctx,
                                                         const std::string& host) {
  if (!ctx || ctx->isServer()) return Error{"no client TLS context"};
  ERR_clear_error();
  BIO* in = nullptr;
  BIO* out = nullptr;
  SSL* ssl = newSsl(ctx->get(), in, out);
  if (ssl == nullptr) return Error{opensslErrors("cannot create a TLS session")};
  std::unique_ptr<TlsEngine> e(new TlsEngine(ctx, ssl, in, out));
  const bool ip = isIpLiteral(host);
  // SNI carries host names only (RFC 6066 forbids IP literals), as libpq does.
  if (!host.empty() && !ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return Error{opensslErrors("cannot set the server name")};
  }
  if (ctx->verifiesHost()) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const int rc = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                      : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    if (rc != 1) return Error{opensslErrors("cannot set the host name to verify")};
  }
  SSL_set_connect_state(ssl);
  auto st = e->step(nullptr);  // ClientHello
  if (!st.ok()) return Error{st.error()};
  return e;
}

Status TlsEngine::failWith(std::string why) {
  state_ = TlsState::kFailed;
  error_ = std::move(why);
  drainOutput();  // an alert may be waiting; the caller sends it before closing
  return Status::fail(error_);
}

void TlsEngine::drainOutput() {
  char buf[16384];
  int n;
  while ((n = BIO_read(out_bio_, buf, sizeof(buf))) > 0) out_.append(buf, static_cast<size_t>(n));
}

std::string TlsEngine::takeOutput() {
  std::string s;
  s.swap(out_);
  return s;
}

// Drives the handshake until it wants more input, then reads whatever application data the
// buffered records hold into `plain` (when given).
Status TlsEngine::step(std::string* plain) {
  if (state_ == TlsState::kHandshake) {
    ERR_clear_error();
    const int rc = SSL_do_handshake(ssl_);
    if (rc != 1) {
      const int err = SSL_get_error(ssl_, rc);
      drainOutput();
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return {};
      const long vr = SSL_get_verify_result(ssl_);  // NOLINT: OpenSSL's type
      if (vr != X509_V_OK) {
        return failWith(std::string("TLS handshake failed: certificate verify failed: ") +
                        X509_verify_cert_error_string(vr));
      }
      return failWith(opensslErrors("TLS handshake failed"));
    }
    state_ = TlsState::kEstablished;
    drainOutput();
    if (!held_plain_.empty()) {
      std::string held;
      held.swap(held_plain_);
      auto st = write(held);
      if (!st.ok()) return st;
    }
  }
  if (state_ != TlsState::kEstablished || plain == nullptr) return {};
  char buf[16384];
  while (true) {
    ERR_clear_error();
    const int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n > 0) {
      plain->append(buf, static_cast<size_t>(n));
      continue;
    }
    const int err = SSL_get_error(ssl_, n);
    drainOutput();
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return {};
    if (err == SSL_ERROR_ZERO_RETURN) {
      state_ = TlsState::kClosed;
      return {};
    }
    return failWith(opensslErrors("TLS read failed"));
  }
}

Status TlsEngine::feed(const char* data, size_t len, std::string& plain) {
  if (state_ == TlsState::kFailed) return Status::fail(error_);
  if (state_ == TlsState::kClosed) return {};  // nothing follows close_notify
  while (len > 0) {
    const int chunk = static_cast<int>(std::min<size_t>(len, 1u << 20));
    const int n = BIO_write(in_, data, chunk);
    if (n <= 0) return failWith("cannot buffer TLS input");
    data += n;
    len -= static_cast<size_t>(n);
  }
  return step(&plain);
}

Status TlsEngine::write(std::string_view plain) {
  if (state_ == TlsState::kFailed) return Status::fail(error_);
  if (state_ == TlsState::kHandshake) {
    if (held_plain_.size() + plain.size() > kTlsMaxHeldBytes) {
      return failWith("too much data written before the TLS handshake ended");
    }
    held_plain_.append(plain);
    return {};
  }
  if (state_ == TlsState::kClosed) return Status::fail("the TLS session is closed");
  while (!plain.empty()) {
    ERR_clear_error();
    const int chunk = static_cast<int>(std::min<size_t>(plain.size(), 1u << 20));
    const int n = SSL_write(ssl_, plain.data(), chunk);
    if (n <= 0) return failWith(opensslErrors("TLS write failed"));
    plain.remove_prefix(static_cast<size_t>(n));
  }
  drainOutput();
  return {};
}

void TlsEngine::shutdown() {
  if (state_ != TlsState::kEstablished && state_ != TlsState::kClosed) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
  drainOutput();
}

std::string TlsEngine::describe() const {
  if (state_ == TlsState::kHandshake || state_ == TlsState::kFailed) return "";
  return std::string(SSL_get_version(ssl_)) + " " + SSL_get_cipher_name(ssl_);
}

std::string TlsEngine::peerSubject() const {
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return "";
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  X509_free(cert);
  return buf;
}

}  // namespace pgwarden::net
