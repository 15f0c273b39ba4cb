// One connection to the upstream PostgreSQL, owned by its Pool. It logs itself in (SCRAM-SHA-256,
// md5, cleartext or trust) with the safety settings in the startup packet, so they are the
// session's reset values; it is lent to one client session at a time, which sees every server
// message; and it resets itself (ROLLBACK if needed, DISCARD ALL) before it goes back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pool/pool_settings.h"
#include "metrics/counters.h"
#include "net/stream.h"
#include "net/upstream.h"
#include "pool/pool.h"
#include "pool/pooled_connection.h"
#include "pool/server_statements.h"
#include "protocol/auth.h"
#include "protocol/messages.h"
#include "pool/server_state.h"
#include "common/param_list.h"

namespace pgwarden::pool {

class ServerConnection;


// The client session a server connection is lent to. Callbacks run on the loop thread.
class ServerLink {
 public:
  // One whole server message.
  virtual void onServerMessage(ServerConnection& s, const protocol::Frame& frame) = 0;
  // A large DataRow or CopyData handed over in pieces as it arrives, so memory stays bounded
  // whatever the row size. `first` carries the 5-byte header; `last` ends the message.
  virtual void onServerChunk(ServerConnection& s, char type, std::string_view bytes, bool first,
                             bool last) = 0;
  // End of one read from the server: a good moment to flush the client.
  virtual void onServerReadDone(ServerConnection& s) = 0;
  // The server's write queue went down (the session may read its client again).
  virtual void onServerWritten(ServerConnection& s) = 0;
  // The connection failed or closed. The session must drop its pointer: the pool owns it.
  virtual void onServerLost(ServerConnection& s, const std::string& why) = 0;

 protected:
  ~ServerLink() = default;
};

// A waiter that works on the ServerConnection itself (client sessions, the catalog refresher).
// The daemon's pools are built with ServerConnectionFactory, so that is what they lend.
class ServerWaiter : public PoolWaiter {
 public:
  virtual void onServerReady(ServerConnection& c) = 0;
  // Anything else is a wiring mistake: the connection is closed and the waiter fails.
  void onConnectionReady(PooledConnection& c) final;

 protected:
  ~ServerWaiter() = default;
};

class ServerConnection final : public net::StreamEvents, public PooledConnection {
 public:
  ServerConnection(Pool& pool, uint64_t id);
  ~ServerConnection() override;
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  // Resolves, connects and logs in; the pool hears onLoginDone or onLoginFailed.
  void start() override;

  uint64_t id() const override { return id_; }
  Pool& pool() { return pool_; }
  ServerState state() const override { return state_; }
  int32_t backendPid() const override { return backend_pid_; }
  int32_t backendKey() const { return backend_key_; }
  char txStatus() const { return tx_status_; }
  void setTxStatus(char s) { tx_status_ = s; }
  // ParameterStatus values as the server reported them, in the order first seen.
  const ParamList& parameters() const;
  std::string_view parameter(std::string_view name) const;
  void noteParameter(std::string_view name, std::string_view value);
  // Values pgwarden SET for parameters the server does not report (extra_float_digits,
  // search_path): cleared by a reset.
  std::string_view unreportedValue(std::string_view name) const;
  void noteUnreported(std::string_view name, std::string_view value);
  uint64_t idleSinceMs() const override { return idle_since_ms_; }
  uint64_t deadlineMs() const { return deadline_ms_; }
  const std::string& lastError() const override { return last_error_; }
  // The login's ErrorResponse SQLSTATE, if the server refused us ("" otherwise).
  const std::string& loginSqlstate() const override { return login_sqlstate_; }
  // The message of that ErrorResponse (at most kMaxLoginMessage bytes).
  const std::string& loginMessage() const override { return login_message_; }
  // The server reported default_transaction_read_only other than "on": never lent again.
  bool readOnlyLost() const { return read_only_lost_; }
  // The server reported standard_conforming_strings or client_encoding other than the values
  // pgwarden reads texts under ("name=value"; "" while they hold): never lent again.
  const std::string& lexicalLost() const { return lexical_lost_; }

  // kIdle -> kActive: server messages now go to `link` (`holder`: the client session's id, for
  // SHOW SERVERS; 0 for pgwarden's own jobs).
  void attach(ServerLink* link, uint64_t holder = 0);
  uint64_t holder() const override { return link_ ? holder_ : 0; }
  // Transaction pooling: the client's transaction ended (idle, status 'I', nothing owed); the
  // connection goes back to the pool as it is, without a reset, for the next transaction.
  void giveBack();
  // Times it was lent (session or transaction), for SHOW SERVERS and reuse figures.
  uint64_t assignments() const override { return assignments_; }
  // Transaction pooling: the prepared statements this connection holds for clients, and which
  // client's unnamed statement it holds (0: none known).
  ServerStatements& statements() { return statements_; }
  uint64_t unnamedOwner() const { return unnamed_owner_; }
  void setUnnamedOwner(uint64_t tag) { unnamed_owner_ = tag; }
  // Values the connection had right after login, before any client changed them (what a client
  // that never set a parameter expects).
  std::string_view loginParameter(std::string_view name) const;
  const std::shared_ptr<CancelFence>& cancelFence() const { return fence_; }
  bool lendable() const override { return fence_->in_flight == 0; }
  // The session is done with it. `rfq_expected` ReadyForQuery messages are still due for work
  // already sent (0 when it is idle at ReadyForQuery); with `need_sync` a Sync is sent first so
  // an unfinished extended-protocol batch ends. The connection drains, then resets itself.
  // `rfq_expected` below 0: what the server still owes cannot be known; the connection closes.
  void release(int rfq_expected, bool need_sync);

  std::string& out() { return stream_.out(); }
  [[nodiscard]] int flush() { return stream_.flush(); }
  size_t pendingBytes() const { return stream_.pendingBytes(); }
  void pauseReading();
  void resumeReading();
  // The link holds the message it is being handed (a reply that waits for the result screens'
  // probe): that message and all after it stay unread, and reading stops, until releaseInput()
  // hands it over again. Dropped when the connection is given back or released.
  void holdInput();
  void releaseInput();

  void close(const std::string& why) override;
  bool closed() const { return stream_.closed(); }

  // Janitor: connect/login, reset and drain deadlines; an idle connection's trim.
  void tick(uint64_t now_ms) override;
  // Gives back the storage of buffers that hold nothing (a quiet connection's), so what an idle
  // connection costs does not depend on the largest message it once carried.
  void trimIdle();

  // StreamEvents
  void onStreamData(net::Stream& s, const char* data, size_t len) override;
  void onStreamEnd(net::Stream& s, int status) override;
  void onStreamConnected(net::Stream& s, int status) override;
  void onStreamWritten(net::Stream& s, int status) override;
  void onStreamClosed(net::Stream& s) override;
  void onStreamTlsReady(net::Stream& s) override;
  void onStreamTlsError(net::Stream& s) override;

 private:
  void setState(ServerState to);
  void fail(const std::string& why);
  // A failure while connecting or logging in, counted under `kind`.
  void failLogin(metrics::ConnectFailure kind, const std::string& why);
  void sendStartup();
  // Handles one whole message outside kActive. Returns false when the connection was closed.
  bool handleLoginMessage(const protocol::Frame& f);
  // The login's messages by type: an authentication request answered (cleartext, md5, or a
  // step of SCRAM-SHA-256 in answerSasl), a ParameterStatus or BackendKeyData noted, the
  // server's refusal, and the ReadyForQuery that ends the login (or starts the role check).
  bool handleAuthRequest(const protocol::Frame& f);
  // An AuthenticationSASL, SASLContinue or SASLFinal (codes 10, 11, 12).
  bool answerSasl(const protocol::AuthRequest& r, const std::string& password);
  bool handleLoginParameter(const protocol::Frame& f);
  bool handleBackendKeyData(const protocol::Frame& f);
  bool handleLoginError(const protocol::Frame& f);
  bool handleLoginReady(const protocol::Frame& f);
  bool askRoleCheck();
  void loginDone();  // logged in (and checked): idle, the pool hears it
  bool handleRoleCheck(const protocol::Frame& f);
  bool handleResetMessage(const protocol::Frame& f);
  bool handleDrainMessage(const protocol::Frame& f);
  bool handleIdleMessage(const protocol::Frame& f);
  void beginReset();
  void processActive();
  void processInput();
  bool watchParameter(const protocol::Frame& f);

  Pool& pool_;
  uint64_t id_;
  std::shared_ptr<const PoolSettings> config_;
  ServerState state_ = ServerState::kConnecting;
  net::Stream stream_;
  net::Resolver resolver_;
  protocol::FrameBuffer in_;
  protocol::FrameLimits limits_;
  ServerLink* link_ = nullptr;
  uint64_t holder_ = 0;
  uint64_t assignments_ = 0;
  ServerStatements statements_;
  uint64_t unnamed_owner_ = 0;
  // Shared with the pool's other connections that logged in with the same values
  // (Pool::shareParams); a change after login copies the list first.
  std::shared_ptr<const ParamList> login_params_;
  std::shared_ptr<CancelFence> fence_;
  std::unique_ptr<protocol::ScramClient> scram_;
  int32_t backend_pid_ = 0;
  int32_t backend_key_ = 0;
  char tx_status_ = 'I';
  std::shared_ptr<const ParamList> params_;  // null: none reported yet
  ParamList unreported_;
  int rfq_expected_ = 0;
  uint64_t deadline_ms_ = 0;
  uint64_t idle_since_ms_ = 0;
  uint64_t trimmed_idle_since_ms_ = 0;  // idle_since_ms_ when tick() last trimmed
  // A large message being streamed to the link: bytes still to come.
  size_t chunk_left_ = 0;
  char chunk_type_ = 0;
  bool paused_ = false;
  bool processing_ = false;
  // Ends a hold (reading resumes unless paused) without handing anything over; false when the
  // connection failed.
  bool dropHold();
  bool held_ = false;       // holdInput(): the message at the front of in_ is not taken yet
  bool redeliver_ = false;  // released while it was being handed over: hand it over again
  bool read_only_lost_ = false;
  std::string lexical_lost_;
  bool ssl_requested_ = false;  // SSLRequest sent (upstream.sslmode); the next byte answers it
  std::string last_error_;
  std::string login_sqlstate_;
  std::string login_message_;
  // The write pool's check of its role after login (askRoleCheck).
  enum class RoleCheck : uint8_t { kNone, kAsked, kDone };
  RoleCheck role_check_ = RoleCheck::kNone;
  bool role_refused_ = false;
  bool role_answered_ = false;
  metrics::ConnectFailure failure_ = metrics::ConnectFailure::kOther;  // why connecting or logging in failed
};

// The daemon's factory: every pool connection is a ServerConnection.
class ServerConnectionFactory final : public ConnectionFactory {
 public:
  std::unique_ptr<PooledConnection> create(Pool& pool, uint64_t id) override {
    return std::make_unique<ServerConnection>(pool, id);
  }
};

// A connection quiet for this long gives back its buffers' storage (trimIdle()).
inline constexpr uint64_t kIdleTrimMs = 1000;

// Messages bigger than this are streamed to the link in pieces rather than buffered whole.
inline constexpr size_t kStreamThreshold = 128 * 1024;

}  // namespace pgwarden::pool
