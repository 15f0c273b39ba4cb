// The MCP front end under test, with no daemon: an McpHost of its own (a real pool manager,
// policy engine and recorder, a config parsed from inline YAML), the McpServer on a loopback
// port trusting loopback callers as the user `agent`, and an HTTP client the test drives request
// by request while the loop turns. No PostgreSQL runs: the tools under test answer from memory,
// refuse before a statement would reach a server, or never start.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/config.h"
#include "mcp/mcp_host.h"
#include "mcp/mcp_server.h"
#include "pool/pool.h"
#include "pool/server_conn.h"
#include "session/statement_policy.h"
#include "session/statement_recorder.h"

namespace pgwarden::mcp::test {

// What every fake process gives the MCP front end: a real statement gate and recorder, no
// statistics, budgets or login limits. Finished statements land in `records`; the statistics
// of every database load while `stats_loading` is set.
class InertMcpHost : public McpHost, public session::StatementSink {
 public:
  explicit InertMcpHost(uv_loop_t* loop) : loop_(loop), policy_(1024, 4096), recorder_(*this, nullptr, "test") {}

  session::GateServices gateServices(const std::string&) override {
    session::GateServices s;
    s.policy = &policy_;
    return s;
  }
  session::StatementRecorder& recorder() override { return recorder_; }
  void writeTransactionEnded(session::TxnEnd) override {}
  void writeCounted(int64_t, bool) override {}
  void cancelServerQuery(int32_t, int32_t, std::shared_ptr<pool::CancelFence> fence) override {
    if (fence) fence->done();
  }
  std::shared_ptr<const analysis::TableStatsSnapshot> tableStats(const std::string&) override {
    return nullptr;
  }
  uv_loop_t* loop() override { return loop_; }
  bool statsLoading(const std::string&) override { return stats_loading; }
  void watchDatabase(const std::string&) override {}
  budgets::BudgetLedger* budgets() override { return nullptr; }
  guards::GuardObserver* guardObserver() override { return nullptr; }
  session::AuthLimiter::Block loginBlocked(const std::string&, const std::string&) override {
    return {};
  }
  void loginFailed(const std::string&, const std::string&) override {}
  uint64_t nextSessionId() override { return ++session_ids_; }
  void onStatement(history::RecordView& record, const session::StatementPlan*) override {
    history::assignRecord(records.emplace_back(), record);
  }

  bool stats_loading = false;
  std::vector<history::Record> records;

 private:
  uv_loop_t* loop_;
  session::PolicyEngine policy_;
  session::StatementRecorder recorder_;
  uint64_t session_ids_ = 0;
};

// The process as the MCP front end sees it: users and groups from a config, and real pools.
class FakeMcpHost final : public InertMcpHost {
 public:
  FakeMcpHost(uv_loop_t* loop, std::shared_ptr<const config::Config> config)
      : InertMcpHost(loop),
        config_(std::move(config)),
        pools_(loop, counters_, std::make_unique<pool::ServerConnectionFactory>()) {
    pools_.setConfig(config::poolSettings(*config_));
  }

  std::optional<McpIdentity> identify(const std::string& user) override {
    const config::UserConfig* u = config_->findUser(user);
    if (!u) return std::nullopt;
    McpIdentity who;
    who.user = u->name;
    who.group = u->group;
    who.policy = config_->findGroup(u->group);
    who.database = "appdb";
    who.server_database = "appdb";
    who.hold = config_;
    return who;
  }
  pool::Pool& pool(const std::string& db, bool replica_ok) override {
    ++pool_asks;
    return pools_.pool(db, false, false, replica_ok);
  }
  pool::Pool& writePool(const std::string& db) override {
    ++pool_asks;
    return pools_.pool(db, false, true);
  }

  pool::PoolManager& pools() { return pools_; }

  int pool_asks = 0;  // a tool that reached for a server connection

 private:
  std::shared_ptr<const config::Config> config_;
  metrics::Counters counters_;
  pool::PoolManager pools_;
};

// One HTTP answer as the client read it.
struct HttpAnswer {
  int status = 0;
  std::string head;  // status line and headers
  Json body;
  // A header's value by its lower-case name.
  std::string header(const std::string& name) const {
    std::string lower = head;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const std::string key = "\r\n" + name + ": ";
    const size_t at = lower.find(key);
    if (at == std::string::npos) return {};
    const size_t from = at + key.size();
    return head.substr(from, head.find("\r\n", from) - from);
  }
};

class McpHarness : public ::testing::Test {
 protected:
  // `groups_yaml`: the `groups:` section's body (the user `agent` is in group `agents`).
  void start(const std::string& groups_yaml) {
    uv_loop_init(&loop_);
    const std::string text =
        "upstream:\n  host: 127.0.0.1\n  port: 1\n  user: app\n  password: pw\n"
        "users:\n  - name: agent\n    method: trust\n    group: agents\n"
        "groups:\n" + groups_yaml;
    host_ = std::make_unique<FakeMcpHost>(&loop_, daemon::parseConfig(text, "test.yaml"));
    config::McpConfig c;
    c.listen = "127.0.0.1:0";
    c.trust_loopback = "agent";
    c.max_rows = 100;
    server_ = std::make_unique<McpServer>(&loop_, *host_, std::move(c), "test");
    ASSERT_TRUE(server_->start().ok());
    ASSERT_GT(server_->port(), 0);
  }

  void TearDown() override {
    if (!server_) return;
    server_->close();
    runUntil([] { return false; }, 50);
    server_.reset();
    host_->pools().closeAll("test over");
    host_->pools().sweep();
    host_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  // Turns the loop until `done` (bounded: a broken test fails, never hangs; nothing asserts on
  // time).
  bool runUntil(const std::function<bool()>& done, int turns = 3000) {
    for (int i = 0; i < turns; ++i) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      if (done()) return true;
      usleep(1000);
    }
    return false;
  }

  // POSTs one JSON-RPC message on a connection of its own and reads the whole answer.
  HttpAnswer post(const Json& message, const std::string& session_id = {},
                  const std::string& version = "2025-11-25") {
    const std::string body = message.dump();
    std::string req = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(server_->port()) +
                      "\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
                      "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    if (!session_id.empty()) req += "Mcp-Session-Id: " + session_id + "\r\n";
    if (message.value("method", std::string()) != "initialize") {
      req += "MCP-Protocol-Version: " + version + "\r\n";
    }
    req += "\r\n" + body;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    HttpAnswer a;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      return a;
    }
    size_t off = 0;
    std::string in;
    bool eof = false;
    runUntil([&] {
      while (off < req.size()) {
        const ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      char buf[65536];
      for (;;) {
        const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0) eof = true;
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      return eof || complete(in);
    });
    ::close(fd);
    const size_t end = in.find("\r\n\r\n");
    if (end == std::string::npos) return a;
    a.head = in.substr(0, end + 2);
    a.status = std::atoi(in.c_str() + in.find(' ') + 1);
    const std::string payload = in.substr(end + 4);
    a.body = payload.empty() ? Json(nullptr) : Json::parse(payload, nullptr, false);
    return a;
  }

  // initialize and notifications/initialized; the session's id.
  std::string openSession(const std::string& version = "2025-11-25") {
    const Json init{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
                    {"params",
                     {{"protocolVersion", version},
                      {"capabilities", Json::object()},
                      {"clientInfo", {{"name", "unit"}, {"version", "1"}}}}}};
    const HttpAnswer a = post(init);
    EXPECT_EQ(a.status, 200) << a.head;
    const std::string id = a.header("mcp-session-id");
    EXPECT_FALSE(id.empty()) << a.head;
    post(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, id, version);
    return id;
  }

  // tools/call `name` with `arguments` in session `id`: the JSON-RPC answer.
  Json call(const std::string& id, const std::string& name, const Json& arguments,
            const std::string& version = "2025-11-25") {
    const Json m{{"jsonrpc", "2.0"}, {"id", ++rpc_id_}, {"method", "tools/call"},
                 {"params", {{"name", name}, {"arguments", arguments}}}};
    const HttpAnswer a = post(m, id, version);
    EXPECT_EQ(a.status, 200) << a.head;
    return a.body;
  }

  uv_loop_t loop_{};
  std::unique_ptr<FakeMcpHost> host_;
  std::unique_ptr<McpServer> server_;
  int rpc_id_ = 1;

 private:
  // A whole answer: the headers and Content-Length bytes of body.
  static bool complete(const std::string& in) {
    const size_t end = in.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    std::string head = in.substr(0, end);
    for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const size_t cl = head.find("content-length: ");
    if (cl == std::string::npos) return false;
    return in.size() - (end + 4) >= std::stoul(head.substr(cl + 16));
  }
};

}  // namespace pgwarden::mcp::test
