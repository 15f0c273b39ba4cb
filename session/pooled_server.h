// The server side of a client session: the pooled connection it holds now (none between
// transactions under pool_mode transaction), the transaction status the server last reported,
// the carried settings the client started with (what RESET goes back to), when the wait for a
// connection began, and, under transaction pooling, the client's prepared statements as texts,
// prepared on whichever connection the session holds next under names of pgwarden's own
// (docs/operations.md). Used like a pointer to the connection it holds: `server_->out()`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pool/server_conn.h"
#include "pool/server_statements.h"
#include "session/reply_queue.h"
#include "session/startup_params.h"

namespace pgwarden::session {

class PooledServer {
 public:
  // The connection held now (null: none).
  pool::ServerConnection* conn() const { return conn_; }
  pool::ServerConnection* operator->() const { return conn_; }
  explicit operator bool() const { return conn_ != nullptr; }
  // The pool lent `c`: the session holds it, and starts from the transaction status it left.
  void attach(pool::ServerConnection& c);
  // The session lets go of its connection (the caller gives it back or closes it); returns it.
  pool::ServerConnection* detach();

  // pool_mode transaction: a connection is held only while a transaction or an answer is owed.
  bool transactionPooled() const { return txn_pooling_; }
  void setTransactionPooled(bool on) { txn_pooling_ = on; }
  // A wait for a connection begins (`now_ns`: uv_hrtime), and how long it lasted.
  void waitStarted(uint64_t now_ns) { wait_started_ns_ = now_ns; }
  uint64_t waitedNs(uint64_t now_ns) const { return now_ns - wait_started_ns_; }

  // The transaction status of the last ReadyForQuery ('I', 'T' or 'E').
  char txStatus() const { return tx_status_; }
  bool idle() const { return tx_status_ == 'I'; }
  // A ReadyForQuery came: its status is the session's and the connection's.
  void readyForQuery(char status);

  // The carried settings the client started with.
  const ParamList& startupParams() const { return startup_params_; }
  ParamList& startupParams() { return startup_params_; }
  void setStartupParams(ParamList params) { startup_params_ = std::move(params); }

  // Transaction pooling: the client's prepared statements as texts. The client named `name`
  // (not the unnamed one) already.
  bool hasStatement(std::string_view name) const;
  // The client's Parse of `name`, which `replies` has just queued: sent (under the connection's
  // own name when it is new there). False: the connection holds the text already, and the
  // caller answers the Parse itself.
  [[nodiscard]] bool parse(std::string_view name, std::string_view sql,
                           const std::vector<uint32_t>& types, ReplyQueue& replies);
  // The connection's name for the client's statement `name`, prepared there first when needed
  // (its answer queued before the message just queued); null when the client has none.
  const std::string* serverStatement(std::string_view name, ReplyQueue& replies);
  // The client closed `name`: forgotten here; the connection keeps the text for whoever sends it
  // next (or until it is its least recently used).
  void closeStatement(std::string_view name);
  // A Parse (the client's or pgwarden's own) failed or was skipped: the connection does not hold
  // its text, and a client's name does not exist.
  void forgetFailedParse(const ReplyQueue::Pending& p);

 private:
  const std::string& prepare(std::shared_ptr<const pool::PreparedText> text, bool internal,
                             ReplyQueue& replies);

  pool::ServerConnection* conn_ = nullptr;
  bool txn_pooling_ = false;
  uint64_t wait_started_ns_ = 0;
  char tx_status_ = 'I';
  ParamList startup_params_;
  std::unordered_map<std::string, std::shared_ptr<const pool::PreparedText>> texts_;
  std::shared_ptr<const pool::PreparedText> unnamed_text_;
  uint64_t unnamed_tag_ = 0;
};

}  // namespace pgwarden::session
