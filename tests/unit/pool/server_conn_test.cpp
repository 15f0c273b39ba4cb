// ServerConnection driven by frames: the test plays the PostgreSQL server on a Unix socket and
// checks the login (with its safety settings), what the lending session sees of a result, a
// server error mid-result, the server vanishing mid-result, and the drain and reset that bring
// a connection back to its pool.
#include "pool/server_conn.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fake_server.h"
#include "pool/pool.h"
#include "protocol/messages.h"

using namespace pgwarden::daemon;
using namespace pgwarden::pool;
using namespace pgwarden;
using pgwarden::daemon::test::FakeServer;
namespace protocol = pgwarden::protocol;

namespace {

// A session as the connection sees it: it waits for a connection, attaches it and records every
// server message it is handed.
class Client final : public ServerWaiter, public ServerLink {
 public:
  void onServerReady(ServerConnection& c) override {
    server = &c;
    c.attach(this);
  }
  void onWaitMoved(Pool&) override {}
  void onServerFailed(const std::string& sqlstate, const std::string& message) override {
    failed_sqlstate = sqlstate;
    failed_message = message;
  }
  void onServerMessage(ServerConnection&, const protocol::Frame& f) override {
    types += f.type;
  }
  void onServerChunk(ServerConnection&, char type, std::string_view bytes, bool first,
                     bool last) override {
    if (first) types += type;
    chunk_bytes += bytes.size();
    if (last) ++chunked_messages;
  }
  void onServerReadDone(ServerConnection&) override {}
  void onServerWritten(ServerConnection&) override {}
  void onServerLost(ServerConnection& c, const std::string& why) override {
    lost_why = why;
    lexical_lost = c.lexicalLost();
    server = nullptr;
  }

  ServerConnection* server = nullptr;
  std::string types;  // one letter per server message, in order
  size_t chunk_bytes = 0;
  int chunked_messages = 0;
  std::string failed_sqlstate;
  std::string failed_message;
  std::string lost_why;
  std::string lexical_lost;
};

std::string frames(const std::function<void(std::string&)>& write) {
  std::string out;
  write(out);
  return out;
}

class ServerConnTest : public ::testing::Test {
 protected:
  ServerConnTest() {
    uv_loop_init(&loop_);
    manager_ = std::make_unique<PoolManager>(&loop_, counters_,
                                             std::make_unique<ServerConnectionFactory>());
    auto config = std::make_shared<PoolSettings>();
    config->upstream.host = server_.dir();
    config->upstream.port = FakeServer::kPort;
    config->upstream.user = "app";
    config->upstream.write_user = "writer";
    manager_->setConfig(config);
  }

  ~ServerConnTest() override {
    manager_->closeAll("test over");
    runUntil([this] { return manager_->openConnections() == 0; });
    manager_->sweep();
    manager_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  Pool& pool() { return manager_->pool("appdb"); }
  // Sessions live as long as the fixture: closing the connections at the end still tells them.
  Client& newClient() { return *clients_.emplace_back(std::make_unique<Client>()); }

  // Turns the loop and the fake server until `done` (bounded, so a broken test fails instead of
  // hanging; nothing here asserts on time).
  bool runUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 5000; ++i) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      server_.accept();
      server_.pump();
      if (done()) return true;
      usleep(1000);
    }
    return false;
  }

  // The next message the connection sent the server.
  bool serverReads(char& type, std::string& body) {
    return runUntil([&] { return server_.takeMessage(type, body); });
  }

  // Acquires for `client` and plays a server that accepts the login.
  void loginAndLend(Client& client) {
    pool().acquire(&client);
    protocol::StartupPacket startup;
    ASSERT_TRUE(runUntil([&] { return server_.takeStartup(startup); }));
    startup_ = startup;
    server_.send(frames([](std::string& o) {
      protocol::writeAuthOk(o);
      protocol::writeParameterStatus(o, "server_version", "15.4");
      protocol::writeParameterStatus(o, "default_transaction_read_only", "on");
      protocol::writeBackendKeyData(o, 4242, 77);
      protocol::writeReadyForQuery(o, 'I');
    }));
    ASSERT_TRUE(runUntil([&] { return client.server != nullptr; }));
  }

  // The client sends a simple Query; the server receives it.
  void query(Client& client, const std::string& sql) {
    protocol::writeQuery(client.server->out(), sql);
    ASSERT_EQ(client.server->flush(), 0);
    char type = 0;
    std::string body;
    ASSERT_TRUE(serverReads(type, body));
    EXPECT_EQ(type, 'Q');
    EXPECT_EQ(body, sql + '\0');
  }

  std::string param(const std::string& name) const {
    for (const auto& [n, v] : startup_.params) {
      if (n == name) return v;
    }
    return "<absent>";
  }

  FakeServer server_;
  uv_loop_t loop_{};
  pgwarden::metrics::Counters counters_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::unique_ptr<PoolManager> manager_;
  protocol::StartupPacket startup_;
};

std::string rowDescription() {
  return frames([](std::string& o) {
    protocol::writeRowDescription(o, {protocol::ColumnDesc{"n", 23, 4, -1}});
  });
}

std::string dataRow(std::string_view v) {
  return frames([v](std::string& o) { protocol::writeDataRow(o, {v}); });
}

TEST_F(ServerConnTest, LogsInWithTheSafetySettingsInTheStartupPacket) {
  ASSERT_TRUE(server_.listening());
  Client& client = newClient();
  loginAndLend(client);
  EXPECT_EQ(param("user"), "app");
  EXPECT_EQ(param("database"), "appdb");
  EXPECT_EQ(param("application_name"), "pgwarden");
  EXPECT_EQ(param("default_transaction_read_only"), "on");
  EXPECT_EQ(param("statement_timeout"), "10000");
  // The lexical settings pgwarden reads texts under, as the session's reset values too.
  EXPECT_EQ(param("standard_conforming_strings"), "on");
  EXPECT_EQ(param("client_encoding"), "UTF8");
  ServerConnection& s = *client.server;
  EXPECT_EQ(s.state(), ServerState::kActive);
  EXPECT_EQ(s.backendPid(), 4242);
  EXPECT_EQ(s.backendKey(), 77);
  EXPECT_EQ(s.parameter("server_version"), "15.4");
  EXPECT_EQ(counters_.last_server_login, 1);
  EXPECT_EQ(client.types, "") << "login messages are the connection's own";
}

TEST_F(ServerConnTest, ALoginRefusedByTheServerFailsTheWaiterWithItsSqlstate) {
  Client& client = newClient();
  pool().acquire(&client);
  protocol::StartupPacket startup;
  ASSERT_TRUE(runUntil([&] { return server_.takeStartup(startup); }));
  server_.send(frames([](std::string& o) {
    protocol::writeError(o, "FATAL", "3D000", "database \"appdb\" does not exist");
  }));
  ASSERT_TRUE(runUntil([&] { return !client.failed_sqlstate.empty(); }));
  EXPECT_EQ(client.failed_sqlstate, "3D000");
  EXPECT_EQ(client.failed_message, "database does not exist on the server");
  EXPECT_EQ(counters_.server_connect_errors, 1u);
  EXPECT_EQ(counters_.last_server_login, 0);
}

TEST_F(ServerConnTest, AServerThatIsNotReadOnlyIsNeverLent) {
  Client& client = newClient();
  pool().acquire(&client);
  protocol::StartupPacket startup;
  ASSERT_TRUE(runUntil([&] { return server_.takeStartup(startup); }));
  server_.send(frames([](std::string& o) {
    protocol::writeAuthOk(o);
    protocol::writeParameterStatus(o, "default_transaction_read_only", "off");
    protocol::writeReadyForQuery(o, 'I');
  }));
  ASSERT_TRUE(runUntil([&] { return !client.failed_sqlstate.empty(); }));
  EXPECT_EQ(client.server, nullptr);
  EXPECT_EQ(client.failed_sqlstate, "08006");
}

// A server whose role or database turned standard_conforming_strings off, or that speaks another
// client_encoding, would split texts otherwise than pgwarden reads them.
class ServerReadsTextsOtherwise
    : public ServerConnTest,
      public ::testing::WithParamInterface<std::pair<const char*, const char*>> {};
TEST_P(ServerReadsTextsOtherwise, AndIsNeverLent) {
  const auto [name, value] = GetParam();
  Client& client = newClient();
  pool().acquire(&client);
  protocol::StartupPacket startup;
  ASSERT_TRUE(runUntil([&] { return server_.takeStartup(startup); }));
  server_.send(frames([&](std::string& o) {
    protocol::writeAuthOk(o);
    protocol::writeParameterStatus(o, "default_transaction_read_only", "on");
    protocol::writeParameterStatus(o, name, value);
    protocol::writeReadyForQuery(o, 'I');
  }));
  ASSERT_TRUE(runUntil([&] { return !client.failed_sqlstate.empty(); }));
  EXPECT_EQ(client.server, nullptr);
  EXPECT_EQ(client.failed_sqlstate, "08006");
}
INSTANTIATE_TEST_SUITE_P(ServerConn, ServerReadsTextsOtherwise,
                         ::testing::Values(std::pair{"standard_conforming_strings", "off"},
                                           std::pair{"client_encoding", "SJIS"}));

// A change the guards did not see (a function's SET), reported mid-session: the connection is
// lost to its session, which ends, and never lent again.
TEST_F(ServerConnTest, ALexicalSettingChangedUnderTheSessionEndsIt) {
  Client& client = newClient();
  loginAndLend(client);
  query(client, "SELECT f()");
  server_.send(frames([](std::string& o) {
    protocol::writeParameterStatus(o, "standard_conforming_strings", "off");
  }));
  ASSERT_TRUE(runUntil([&] { return !client.lost_why.empty(); }));
  EXPECT_EQ(client.lexical_lost, "standard_conforming_strings=off");
  EXPECT_NE(client.lost_why.find("standard_conforming_strings=off"), std::string::npos)
      << client.lost_why;
  EXPECT_EQ(client.types, "") << "the report is not forwarded";
  ASSERT_TRUE(runUntil([&] { return pool().stats().total == 0; }));
}

// The write pool (docs/writes.md): its own role, not read-only, and lent only once the server
// said the role is no superuser (nor a member of one, nor BYPASSRLS).
class WritePoolTest : public ServerConnTest {
 protected:
  // Logs a write-pool connection in and answers its role check with `superuser` ("t"/"f").
  void loginWritePool(Client& client, const char* superuser) {
    Pool& writes = manager_->pool("appdb", false, true);
    EXPECT_NE(&writes, &pool());
    EXPECT_EQ(writes.role(), "writer");
    writes.acquire(&client);
    ASSERT_TRUE(runUntil([&] { return server_.takeStartup(startup_); }));
    EXPECT_EQ(param("user"), "writer");
    EXPECT_EQ(param("default_transaction_read_only"), "off");
    server_.send(frames([](std::string& o) {
      protocol::writeAuthOk(o);
      protocol::writeParameterStatus(o, "default_transaction_read_only", "off");
      protocol::writeReadyForQuery(o, 'I');
    }));
    char type = 0;
    std::string body;
    ASSERT_TRUE(serverReads(type, body));
    EXPECT_EQ(type, 'Q');
    EXPECT_NE(body.find("rolsuper"), std::string::npos);
    EXPECT_EQ(client.server, nullptr) << "lent before the role check answered";
    server_.send(rowDescription() + dataRow(superuser) + frames([](std::string& o) {
      protocol::writeCommandComplete(o, "SELECT 1");
      protocol::writeReadyForQuery(o, 'I');
    }));
  }
};

TEST_F(WritePoolTest, APlainRoleIsLentWritable) {
  Client& client = newClient();
  loginWritePool(client, "f");
  ASSERT_TRUE(runUntil([&] { return client.server != nullptr; }));
  EXPECT_EQ(client.server->state(), ServerState::kActive);
  EXPECT_EQ(client.types, "") << "the role check is the connection's own";
}

TEST_F(WritePoolTest, ASuperuserRoleIsRefusedWithAClearError) {
  Client& client = newClient();
  loginWritePool(client, "t");
  ASSERT_TRUE(runUntil([&] { return !client.failed_sqlstate.empty(); }));
  EXPECT_EQ(client.server, nullptr);
  EXPECT_EQ(client.failed_sqlstate, "42501");
  EXPECT_NE(client.failed_message.find("refuses the write role \"writer\""), std::string::npos)
      << client.failed_message;
}

TEST_F(ServerConnTest, AResultReachesTheSessionInOrderAndAnErrorMidResultLeavesItUsable) {
  Client& client = newClient();
  loginAndLend(client);
  query(client, "SELECT n FROM t");
  server_.send(rowDescription() + dataRow("1") + dataRow("2") + frames([](std::string& o) {
                 protocol::writeError(o, "ERROR", "22012", "division by zero");
                 protocol::writeReadyForQuery(o, 'I');
               }));
  ASSERT_TRUE(runUntil([&] { return client.types.size() == 5; }));
  EXPECT_EQ(client.types, "TDDEZ");
  ASSERT_NE(client.server, nullptr);
  EXPECT_EQ(client.server->state(), ServerState::kActive);

  // The next statement on the same connection.
  query(client, "SELECT 1");
  server_.send(rowDescription() + dataRow("1") + frames([](std::string& o) {
                 protocol::writeCommandComplete(o, "SELECT 1");
                 protocol::writeReadyForQuery(o, 'I');
               }));
  ASSERT_TRUE(runUntil([&] { return client.types.size() == 9; }));
  EXPECT_EQ(client.types, "TDDEZTDCZ");
}

TEST_F(ServerConnTest, ARowTooLargeToBufferReachesTheSessionInPieces) {
  Client& client = newClient();
  loginAndLend(client);
  query(client, "SELECT big");
  const std::string big(kStreamThreshold * 2, 'x');
  const std::string row = dataRow(big);
  server_.send(rowDescription() + row + frames([](std::string& o) {
                 protocol::writeCommandComplete(o, "SELECT 1");
                 protocol::writeReadyForQuery(o, 'I');
               }));
  ASSERT_TRUE(runUntil([&] { return client.types.size() == 4; }));
  EXPECT_EQ(client.types, "TDCZ");
  EXPECT_EQ(client.chunked_messages, 1);
  EXPECT_EQ(client.chunk_bytes, row.size());
}

TEST_F(ServerConnTest, TheServerVanishingMidResultTellsTheSessionAndFreesTheConnection) {
  Client& client = newClient();
  loginAndLend(client);
  query(client, "SELECT n FROM t");
  server_.send(rowDescription() + dataRow("1"));
  ASSERT_TRUE(runUntil([&] { return client.types.size() == 2; }));
  server_.hangUp();
  ASSERT_TRUE(runUntil([&] { return !client.lost_why.empty(); }));
  EXPECT_EQ(client.lost_why, "the server closed the connection");
  EXPECT_EQ(client.server, nullptr);
  EXPECT_EQ(counters_.server_lost, 1u);
  ASSERT_TRUE(runUntil([&] { return pool().stats().total == 0; }));
  EXPECT_EQ(counters_.server_current, 0u);
}

TEST_F(ServerConnTest, ALetGoMidResultDrainsResetsAndGoesBackToThePool) {
  Client& first = newClient();
  loginAndLend(first);
  ServerConnection* s = first.server;
  const uint64_t id = s->id();
  query(first, "SELECT n FROM t");
  server_.send(rowDescription() + dataRow("1"));
  ASSERT_TRUE(runUntil([&] { return first.types.size() == 2; }));

  // The session leaves with one ReadyForQuery still owed.
  s->release(1, false);
  first.server = nullptr;
  EXPECT_EQ(s->state(), ServerState::kDraining);
  server_.send(dataRow("2") + frames([](std::string& o) {
                 protocol::writeCommandComplete(o, "SELECT 2");
                 protocol::writeReadyForQuery(o, 'I');
               }));
  char type = 0;
  std::string body;
  ASSERT_TRUE(serverReads(type, body));
  EXPECT_EQ(type, 'Q');
  EXPECT_EQ(body, std::string("DISCARD ALL") + '\0');
  EXPECT_EQ(first.types, "TD") << "nothing reaches a session after it let go";
  EXPECT_EQ(s->state(), ServerState::kResetting);
  server_.send(frames([](std::string& o) {
    protocol::writeCommandComplete(o, "DISCARD ALL");
    protocol::writeReadyForQuery(o, 'I');
  }));
  ASSERT_TRUE(runUntil([&] { return pool().stats().idle == 1; }));

  Client& second = newClient();
  pool().acquire(&second);
  ASSERT_TRUE(runUntil([&] { return second.server != nullptr; }));
  EXPECT_EQ(second.server->id(), id);
  EXPECT_EQ(pool().stats().total, 1);
}

TEST_F(ServerConnTest, AGiveBackKeepsItsStatementsAndAFencedConnectionWaitsForItsCancel) {
  Client& first = newClient();
  loginAndLend(first);
  ServerConnection* s = first.server;
  query(first, "SELECT 1");
  server_.send(frames([](std::string& o) {
    protocol::writeCommandComplete(o, "SELECT 1");
    protocol::writeReadyForQuery(o, 'I');
  }));
  ASSERT_TRUE(runUntil([&] { return first.types == "CZ"; }));
  const auto text = std::make_shared<const PreparedText>("SELECT $1", std::vector<uint32_t>{23});
  const std::string name = s->statements().add(text, nullptr);
  EXPECT_EQ(s->loginParameter("server_version"), "15.4");

  // A cancel in flight for the previous client: given back, but not lent until it is answered.
  s->cancelFence()->sent();
  s->giveBack();
  first.server = nullptr;
  EXPECT_EQ(s->state(), ServerState::kIdle);
  EXPECT_EQ(s->holder(), 0u);
  Client& second = newClient();
  EXPECT_EQ(pool().takeIdle(), nullptr) << "lent while a cancel for it was in flight";
  pool().acquire(&second);
  for (int i = 0; i < 50; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(second.server, nullptr);
  s->cancelFence()->done();
  ASSERT_TRUE(runUntil([&] { return second.server != nullptr; }));
  EXPECT_EQ(second.server, s) << "no new connection: the same one, without a reset";
  ASSERT_NE(s->statements().find(*text), nullptr);
  EXPECT_EQ(*s->statements().find(*text), name);
  EXPECT_EQ(s->assignments(), 2u);
  EXPECT_EQ(pool().stats().total, 1);
  EXPECT_EQ(counters_.pool_assignments, 2u);

  // A reset (session mode's, or after a client left mid-transaction) forgets them: DISCARD ALL.
  s->release(0, false);
  second.server = nullptr;
  char type = 0;
  std::string body;
  ASSERT_TRUE(serverReads(type, body));
  EXPECT_EQ(body, std::string("DISCARD ALL") + '\0');
  EXPECT_EQ(s->statements().size(), 0u);
}

TEST_F(ServerConnTest, LoginParametersAreSharedAndALaterChangeCopiesThemFirst) {
  Client& client = newClient();
  loginAndLend(client);
  ServerConnection& s = *client.server;
  ASSERT_EQ(s.parameter("server_version"), "15.4");
  // The next connection that logs in with the same values gets the very same list.
  auto same = std::make_shared<const ParamList>(s.parameters());
  EXPECT_EQ(pool().shareParams(same).get(), &s.parameters());

  s.noteParameter("DateStyle", "German, DMY");   // a client's SET, reported by the server
  s.noteParameter("server_version", "15.4");     // unchanged: nothing copied or added
  EXPECT_EQ(s.parameter("DateStyle"), "German, DMY");
  EXPECT_EQ(s.loginParameter("DateStyle"), "");
  EXPECT_EQ(s.parameters().size(), 3u);
  auto shared = pool().shareParams(std::make_shared<const ParamList>(*same));
  EXPECT_NE(shared.get(), &s.parameters()) << "the change stays this connection's";
  EXPECT_EQ(*shared, *same);

  s.trimIdle();  // nothing buffered: the buffers go, the connection goes on working
  query(client, "SELECT 1");
}

}  // namespace
