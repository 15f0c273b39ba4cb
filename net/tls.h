// TLS for both sides of the proxy: a TlsContext (one immutable SSL_CTX built from config, so a
// reload builds a new one that only new connections use) and a TlsEngine (one SSL object over
// two memory BIOs: ciphertext in from the socket, plaintext out, and the reverse for writes).
// The engine never touches a socket; Stream feeds it. Failures are Status, never exceptions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

// OpenSSL types, forward-declared so headers that hold a config need not pull in OpenSSL.
typedef struct ssl_ctx_st SSL_CTX;  // NOLINT: OpenSSL's own names
typedef struct ssl_st SSL;          // NOLINT
typedef struct bio_st BIO;          // NOLINT

namespace pgwarden::net {

// Client side (`tls.mode`): what pgwarden accepts from its clients.
enum class TlsMode { kDisable, kAllow, kRequire };
// Server side (`upstream.sslmode`): libpq's meanings.
enum class UpstreamSslMode { kDisable, kPrefer, kRequire, kVerifyCa, kVerifyFull };

const char* tlsModeName(TlsMode m);
const char* upstreamSslModeName(UpstreamSslMode m);

class TlsContext {
 public:
  // Server context for client connections: certificate chain and key; with `ca_file`, client
  // certificates are requested and verified (and required when `require_client_cert`).
  [[nodiscard]] static Result<std::shared_ptr<const TlsContext>> makeServer(
      const std::string& cert_file, const std::string& key_file, const std::string& ca_file,
      bool require_client_cert);
  // Client context for server connections. `root_cert` is required for verify-ca/verify-full;
  // with `require` it turns the mode into verify-ca, as libpq does when a root file exists.
  [[nodiscard]] static Result<std::shared_ptr<const TlsContext>> makeClient(
      UpstreamSslMode mode, const std::string& root_cert);

  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* get() const { return ctx_; }
  bool isServer() const { return server_; }
  bool verifiesPeer() const { return verify_peer_; }
  bool verifiesHost() const { return verify_host_; }

 private:
  TlsContext(SSL_CTX* ctx, bool server) : ctx_(ctx), server_(server) {}
  SSL_CTX* ctx_;
  bool server_;
  bool verify_peer_ = false;
  bool verify_host_ = false;
};

// The `tls:` section. `context` is null when TLS is not configured.
struct TlsConfig {
  TlsMode mode = TlsMode::kDisable;
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  bool require_client_cert = false;
  std::shared_ptr<const TlsContext> context;

  bool enabled() const { return mode != TlsMode::kDisable && context != nullptr; }
};

// `upstream.sslmode` and `upstream.sslrootcert`. `context` is null for sslmode disable.
struct UpstreamTlsConfig {
  UpstreamSslMode sslmode = UpstreamSslMode::kDisable;
  std::string sslrootcert;
  std::shared_ptr<const TlsContext> context;
};

// Config loading only (these throw config::ConfigError with line and dotted key). Relative
// paths are taken from the directory of `config_path`. Certificates and keys are loaded here,
// so --check-config and a reload both reject a bad one and keep what was running.
TlsConfig parseTlsConfig(const YAML::Node& tls, const std::string& config_path);
// Reads only the sslmode/sslrootcert keys of the `upstream:` map (the caller checks the others).
UpstreamTlsConfig parseUpstreamTls(const YAML::Node& upstream, const std::string& config_path);

enum class TlsState {
  kHandshake,    // records go back and forth; no application data yet
  kEstablished,  // plaintext flows both ways
  kClosed,       // the peer sent close_notify
  kFailed,       // handshake or record error; error() says why
};

class TlsEngine {
 public:
  // Accepts a handshake (server role).
  [[nodiscard]] static Result<std::unique_ptr<TlsEngine>> makeServer(
      std::shared_ptr<const TlsContext> ctx);
  // Starts a handshake (client role): the ClientHello is in output() at once. `host` is sent as
  // SNI when it is a name, and checked against the certificate when the context verifies hosts.
  [[nodiscard]] static Result<std::unique_ptr<TlsEngine>> makeClient(
      std::shared_ptr<const TlsContext> ctx, const std::string& host);

  ~TlsEngine();
  TlsEngine(const TlsEngine&) = delete;
  TlsEngine& operator=(const TlsEngine&) = delete;

  // Ciphertext from the network. Decrypted bytes are appended to `plain`; handshake replies,
  // alerts and the like go to output(). A failure leaves the state kFailed.
  [[nodiscard]] Status feed(const char* data, size_t len, std::string& plain);
  // Plaintext to send. Before the handshake ends it is held and sent once it does.
  [[nodiscard]] Status write(std::string_view plain);
  // Queues close_notify (best effort: nothing happens unless established).
  void shutdown();

  // Ciphertext waiting for the network; the caller moves it out with takeOutput().
  bool hasOutput() const { return !out_.empty(); }
  std::string takeOutput();

  TlsState state() const { return state_; }
  bool established() const { return state_ == TlsState::kEstablished; }
  const std::string& error() const { return error_; }
  // "TLSv1.3 TLS_AES_256_GCM_SHA384" once established.
  std::string describe() const;
  // Subject of the verified peer certificate, "" when the peer sent none.
  std::string peerSubject() const;

 private:
  TlsEngine(std::shared_ptr<const TlsContext> ctx, SSL* ssl, BIO* in, BIO* out);
  [[nodiscard]] Status step(std::string* plain);
  [[nodiscard]] Status failWith(std::string why);
  void drainOutput();

  std::shared_ptr<const TlsContext> ctx_;  // keeps the SSL_CTX alive through a reload
  SSL* ssl_;
  BIO* in_;   // network -> SSL (owned by ssl_)
  BIO* out_bio_;  // SSL -> network (owned by ssl_)
  TlsState state_ = TlsState::kHandshake;
  std::string out_;            // ciphertext for the network
  std::string held_plain_;     // plaintext written before the handshake ended
  std::string error_;
};

// Upper bound on plaintext held before the handshake ends and on ciphertext the engine keeps
// between feeds; past it the connection fails rather than buffering without limit.
inline constexpr size_t kTlsMaxHeldBytes = 1u << 20;

}  // namespace pgwarden::net
