// What a Pool needs of one of its connections, and the factory that makes them. The pool's rules
// (lending, waiting, limits, the pause after a failed login, closing idle connections) run the
// same against the real ServerConnection and against a fake in the unit tests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "pool/server_state.h"

namespace pgwarden::pool {

class Pool;

// Cancel requests sent for a connection's backend and not answered yet: the connection is not
// lent to another client until they are (a late cancel must never hit another client's statement).
// Shared with the cancel senders, which outlive nothing: `cleared` is unset when the connection goes.
struct CancelFence {
  int in_flight = 0;
  std::function<void()> cleared;
  void sent() { ++in_flight; }
  void done() {
    if (in_flight > 0 && --in_flight == 0 && cleared) cleared();
  }
};

// A connection as its pool sees it. It tells its pool about every change the pool cares about:
// onLoginDone (now kIdle), onLoginFailed (a login ended in kClosing), onIdle (a reset finished)
// and onClosed (gone; the pool buries it). Everything runs on the loop thread.
class PooledConnection {
 public:
  virtual ~PooledConnection() = default;

  virtual uint64_t id() const = 0;
  virtual ServerState state() const = 0;
  // Connects and logs in. A failure may be reported before start() returns.
  virtual void start() = 0;
  // Safe to call twice. Closing a login in flight reports onLoginFailed from inside the call;
  // onClosed follows once the socket is gone (possibly before close() returns too).
  virtual void close(const std::string& why) = 0;
  // Janitor: connect, login, reset and drain deadlines.
  virtual void tick(uint64_t now_ms) = 0;
  virtual uint64_t idleSinceMs() const = 0;
  virtual int32_t backendPid() const = 0;
  virtual const std::string& lastError() const = 0;
  // The SQLSTATE the server refused the login with ("" when it did not).
  virtual const std::string& loginSqlstate() const = 0;
  // The message of that ErrorResponse (at most kMaxLoginMessage bytes).
  virtual const std::string& loginMessage() const = 0;
  // False while the connection may not be lent though it is idle (a cancel request sent for its
  // previous client has not reached the server yet).
  virtual bool lendable() const { return true; }
  // The client session holding it (its id; 0 when idle or pgwarden's own) and how many times it
  // was lent, for SHOW SERVERS.
  virtual uint64_t holder() const { return 0; }
  virtual uint64_t assignments() const { return 0; }
};

// The server's login error message is kept up to this many bytes.
inline constexpr size_t kMaxLoginMessage = 256;

// Makes a pool's connections: ServerConnectionFactory in the daemon, a fake in tests.
class ConnectionFactory {
 public:
  virtual ~ConnectionFactory() = default;
  // A new connection for `pool`, not started yet.
  virtual std::unique_ptr<PooledConnection> create(Pool& pool, uint64_t id) = 0;
};

}  // namespace pgwarden::pool
