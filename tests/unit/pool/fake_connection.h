// A pool connection that does what the test tells it: log in, fail its login, be lent, come back
// from a reset, finish closing. It reports to its pool exactly when ServerConnection would.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pool/pool.h"
#include "pool/pooled_connection.h"

namespace pgwarden::daemon::test {

class FakeConnection final : public pool::PooledConnection {
 public:
  FakeConnection(pool::Pool& pool, uint64_t id, bool fail_at_start)
      : pool_(pool), id_(id), fail_at_start_(fail_at_start) {}

  uint64_t id() const override { return id_; }
  pool::ServerState state() const override { return state_; }
  void start() override {
    if (fail_at_start_) {
      // As ServerConnection::start when the socket cannot even be made.
      state_ = pool::ServerState::kClosing;
      last_error_ = "socket: too many open files";
      pool_.onLoginFailed(*this, last_error_);
      closeCompletes();
      return;
    }
    state_ = pool::ServerState::kLogin;
  }
  void close(const std::string& why) override {
    if (state_ == pool::ServerState::kClosing || state_ == pool::ServerState::kClosed) return;
    const pool::ServerState before = state_;
    state_ = pool::ServerState::kClosing;
    if (last_error_.empty()) last_error_ = why;
    ++closes_;
    if (before == pool::ServerState::kResolving || before == pool::ServerState::kConnecting ||
        before == pool::ServerState::kLogin) {
      pool_.onLoginFailed(*this, last_error_);
    }
  }
  void tick(uint64_t) override {}
  uint64_t idleSinceMs() const override { return idle_since_ms_; }
  int32_t backendPid() const override { return static_cast<int32_t>(1000 + id_); }
  const std::string& lastError() const override { return last_error_; }
  const std::string& loginSqlstate() const override { return login_sqlstate_; }
  const std::string& loginMessage() const override { return login_message_; }

  // The server accepted the login: the connection is idle in its pool.
  void loginSucceeds() {
    state_ = pool::ServerState::kIdle;
    idle_since_ms_ = pool_.manager().nowMs();
    pool_.onLoginDone(*this);
  }
  // The server refused the login with `sqlstate`.
  void loginFails(const std::string& sqlstate) {
    login_sqlstate_ = sqlstate;
    close("the server refused the login: " + sqlstate);
  }
  // What a waiter does with the connection it got (ServerConnection::attach).
  void attach() { state_ = pool::ServerState::kActive; }
  // The waiter let go and the reset finished: back in the pool.
  void resetDone() {
    state_ = pool::ServerState::kIdle;
    idle_since_ms_ = pool_.manager().nowMs();
    pool_.onIdle(*this);
  }
  // The socket's close callback ran. The pool buries the connection (freed at the next sweep).
  void closeCompletes() {
    state_ = pool::ServerState::kClosed;
    pool_.onClosed(*this);
  }
  int closes() const { return closes_; }
  pool::Pool& pool() { return pool_; }

 private:
  pool::Pool& pool_;
  uint64_t id_;
  bool fail_at_start_;
  pool::ServerState state_ = pool::ServerState::kConnecting;
  uint64_t idle_since_ms_ = 0;
  std::string last_error_;
  std::string login_sqlstate_;
  std::string login_message_;
  int closes_ = 0;
};

// A client waiting for a connection: it attaches what it gets and writes what happened to a log
// shared by the test.
class RecordingWaiter final : public pool::PoolWaiter {
 public:
  RecordingWaiter(std::string name, std::vector<std::string>& log)
      : name_(std::move(name)), log_(log) {}

  void onConnectionReady(pool::PooledConnection& c) override {
    conn = static_cast<FakeConnection*>(&c);
    conn->attach();
    log_.push_back(name_ + " ready " + std::to_string(c.id()));
  }
  void onServerFailed(const std::string& sqlstate, const std::string& message) override {
    failed_sqlstate = sqlstate;
    failed_message = message;
    log_.push_back(name_ + " failed " + sqlstate);
  }
  void onWaitMoved(pool::Pool& to) override {
    moved_to = &to;
    log_.push_back(name_ + " moved");
  }

  FakeConnection* conn = nullptr;
  pool::Pool* moved_to = nullptr;
  std::string failed_sqlstate;
  std::string failed_message;

 private:
  std::string name_;
  std::vector<std::string>& log_;
};

// The settings the pool tests start from: role "app", pools of up to 2 and no minimum, a 5 s
// acquire timeout, a 2 s pause after a failed login, a minute's idle timeout.
inline std::shared_ptr<pool::PoolSettings> poolSettings() {
  auto config = std::make_shared<pool::PoolSettings>();
  config->upstream.user = "app";
  config->upstream.login_retry = net::Millis(2000);
  config->pool.min_size = 0;
  config->pool.max_size = 2;
  config->pool.acquire_timeout = net::Millis(5000);
  config->pool.idle_timeout = net::Millis(60000);
  return config;
}

// Makes FakeConnections and remembers them in order (they stay valid until the pool manager's
// next sweep after they closed).
class FakeFactory final : public pool::ConnectionFactory {
 public:
  std::unique_ptr<pool::PooledConnection> create(pool::Pool& pool, uint64_t id) override {
    auto c = std::make_unique<FakeConnection>(pool, id, fail_at_start);
    made.push_back(c.get());
    return c;
  }
  // Finishes every close in progress, as the sockets' close callbacks would.
  void closesComplete() {
    for (FakeConnection* c : made) {
      if (c->state() == pool::ServerState::kClosing) c->closeCompletes();
    }
  }

  bool fail_at_start = false;
  std::vector<FakeConnection*> made;
};

}  // namespace pgwarden::daemon::test
