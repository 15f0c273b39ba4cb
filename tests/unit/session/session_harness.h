// A ClientSession under test, with no daemon: a SessionHost of its own (a real pool, policy engine
// and recorder, a config parsed from inline YAML, a clock that is the loop's), the client as a
// plain socket the test writes and reads frame by frame, and the server played by the test on a
// Unix socket (tests/unit/pool/fake_server.h). No PostgreSQL runs.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../pool/fake_server.h"
#include "daemon/config.h"
#include "pool/server_conn.h"
#include "session/auth_limiter.h"
#include "session/client_session.h"
#include "session/session_host.h"
#include "session/statement_policy.h"
#include "session/statement_recorder.h"

namespace pgwarden::daemon::test {

// The process as a session sees it. Finished statements land in `records`.
class FakeHost final : public session::SessionHost, public session::StatementSink {
 public:
  FakeHost(uv_loop_t* loop, std::shared_ptr<const config::Config> config)
      : loop_(loop),
        config_(std::move(config)),
        pools_(loop, counters_, std::make_unique<pool::ServerConnectionFactory>()),
        policy_(1024, 4096),
        recorder_(*this, nullptr, "test") {
    pools_.setConfig(config::poolSettings(*config_));
  }

  uv_loop_t* loop() override { return loop_; }
  uint64_t nowMs() const override { return uv_now(loop_); }
  bool shuttingDown() const override { return false; }
  const std::shared_ptr<const config::Config>& config() const override { return config_; }
  metrics::Counters& counters() override { return counters_; }
  pool::PoolManager& pools() override { return pools_; }
  session::PolicyEngine& policy() override { return policy_; }
  session::StatementRecorder& statementRecorder() override { return recorder_; }
  session::AuthLimiter& authLimiter() override { return limiter_; }
  const std::string& saltKey() const override { return salt_; }
  budgets::BudgetLedger* budgets() override { return nullptr; }
  guards::GuardObserver* guardObserver() override { return nullptr; }
  session::GateServices gateServices(const std::string&) override {
    session::GateServices s;
    s.policy = &policy_;
    return s;
  }
  void poolWaited(bool, std::chrono::nanoseconds) override {}
  std::shared_ptr<const analysis::TableStatsSnapshot> tableStats(const std::string&) override {
    return nullptr;
  }
  void watchDatabase(const std::string&) override {}
  bool waitForStats(const std::string&, uint64_t) override { return false; }
  void registerCancelKey(session::ClientSession*, int32_t& pid, int32_t& key) override {
    pid = 1001;
    key = 2002;
  }
  void unregisterCancelKey(int32_t, int32_t) override {}
  void handleCancelRequest(int32_t, int32_t) override {}
  void cancelServerQuery(int32_t pid, int32_t key,
                         std::shared_ptr<pool::CancelFence> fence) override {
    cancels.emplace_back(pid, key);
    if (fence) fence->done();
  }
  void leftStartup(uint64_t) override {}
  void onSessionClosed(session::ClientSession*) override { ++closed; }
  std::unique_ptr<session::ConsoleSession> openConsole(uint64_t, const std::string&,
                                                       const std::string&,
                                                       const std::string&) override {
    return nullptr;
  }
  void onStatement(history::RecordView& record, const session::StatementPlan*) override {
    history::assignRecord(records.emplace_back(), record);
  }

  std::vector<history::Record> records;
  std::vector<std::pair<int32_t, int32_t>> cancels;
  int closed = 0;

 private:
  uv_loop_t* loop_;
  std::shared_ptr<const config::Config> config_;
  metrics::Counters counters_;
  pool::PoolManager pools_;
  session::PolicyEngine policy_;
  session::StatementRecorder recorder_;
  session::AuthLimiter limiter_;
  std::string salt_ = "test-salt-key";
};

// The test's end of the client connection: frames written whole, frames read as they come.
class ClientEnd {
 public:
  explicit ClientEnd(int fd) : fd_(fd) {}
  ~ClientEnd() { hangUp(); }
  void send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  void pump() {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0) eof_ = true;
      if (n <= 0) return;
      in_.append(buf, static_cast<size_t>(n));
    }
  }
  bool takeMessage(char& type, std::string& body) { return takeFrame(in_, type, body); }
  bool eof() const { return eof_; }
  void hangUp() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  std::string in_;
  bool eof_ = false;
};

struct Msg {
  char type;
  std::string body;
};

class SessionHarness : public ::testing::Test {
 protected:
  // `groups_yaml`: the `groups:` section's body (the user `agent` is in group `agents`).
  void start(const std::string& groups_yaml) {
    ASSERT_TRUE(server_.listening());
    uv_loop_init(&loop_);
    const std::string text = "upstream:\n  host: " + server_.dir() + "\n  port: " +
                             std::to_string(FakeServer::kPort) +
                             "\n  user: app\n  password: pw\n"
                             "users:\n  - name: agent\n    method: trust\n    group: agents\n"
                             "groups:\n" + groups_yaml;
    host_ = std::make_unique<FakeHost>(&loop_, parseConfig(text, "test.yaml"));
    listen_path_ = server_.dir() + "/client.sock";
    uv_pipe_init(&loop_, &listener_, 0);
    listener_.data = this;
    ASSERT_EQ(uv_pipe_bind(&listener_, listen_path_.c_str()), 0);
    ASSERT_EQ(uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 8, &SessionHarness::onConnection), 0);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, listen_path_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    client_ = std::make_unique<ClientEnd>(fd);
    ASSERT_TRUE(runUntil([this] { return session_ != nullptr; }));
  }

  void TearDown() override {
    if (!host_) return;
    client_->hangUp();
    runUntil([this] { return host_->closed > 0; });
    host_->pools().closeAll("test over");
    runUntil([this] { return host_->pools().openConnections() == 0; });
    host_->pools().sweep();
    session_.reset();
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    host_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  static void onConnection(uv_stream_t* listener, int status) {
    auto* self = static_cast<SessionHarness*>(listener->data);
    if (status != 0 || self->session_) return;
    self->session_ = std::make_unique<session::ClientSession>(*self->host_, 1, true);
    EXPECT_EQ(self->session_->accept(listener), 0);
  }

  // Turns the loop and both fake ends until `done` (bounded: a broken test fails, never hangs;
  // nothing asserts on time).
  bool runUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 3000; ++i) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      server_.accept();
      server_.pump();
      if (client_) client_->pump();
      if (done()) return true;
      usleep(1000);
    }
    return false;
  }

  // The client logs in as `agent`; the test plays the server's login. Returns once the client
  // has its ReadyForQuery.
  void login() {
    std::string startup;
    protocol::writeStartup(startup, {{"user", "agent"}, {"database", "appdb"}});
    client_->send(startup);
    serverAcceptsLogin();
    ASSERT_TRUE(clientReadsUntil('Z').back().type == 'Z');
  }

  // The server's side of a login: takes the startup the session forwards and answers AuthOk,
  // `status` as ParameterStatus, BackendKeyData 4242/77 and ReadyForQuery.
  void serverAcceptsLogin(const std::vector<std::pair<std::string, std::string>>& status = {
                              {"server_version", "15.4"}, {"DateStyle", "ISO, MDY"}}) {
    protocol::StartupPacket packet;
    ASSERT_TRUE(runUntil([&] { return server_.takeStartup(packet); }));
    std::string o;
    protocol::writeAuthOk(o);
    for (const auto& [name, value] : status) protocol::writeParameterStatus(o, name, value);
    protocol::writeBackendKeyData(o, 4242, 77);
    protocol::writeReadyForQuery(o, 'I');
    server_.send(o);
  }

  // What the client receives up to and including the first message of type `last`.
  std::vector<Msg> clientReadsUntil(char last) {
    std::vector<Msg> got;
    runUntil([&] {
      Msg m;
      while (client_->takeMessage(m.type, m.body)) {
        got.push_back(m);
        if (m.type == last) return true;
      }
      return client_->eof();
    });
    if (got.empty()) got.push_back({'?', ""});
    return got;
  }

  // What the server receives up to and including the first message of type `last`.
  std::vector<Msg> serverReadsUntil(char last) {
    std::vector<Msg> got;
    runUntil([&] {
      Msg m;
      while (server_.takeMessage(m.type, m.body)) {
        got.push_back(m);
        if (m.type == last) return true;
      }
      return false;
    });
    if (got.empty()) got.push_back({'?', ""});
    return got;
  }

  static std::string types(const std::vector<Msg>& msgs) {
    std::string t;
    for (const auto& m : msgs) t.push_back(m.type);
    return t;
  }

  uv_loop_t loop_{};
  uv_pipe_t listener_{};
  std::string listen_path_;
  FakeServer server_;
  std::unique_ptr<FakeHost> host_;
  std::unique_ptr<session::ClientSession> session_;
  std::unique_ptr<ClientEnd> client_;
};

}  // namespace pgwarden::daemon::test
