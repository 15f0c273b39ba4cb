// The server side of a session: without a connection, the transaction status, the mode and the
// client's statement names; through a session on the harness in pool_mode transaction, a named
// statement prepared on the server under pgwarden's own name and used by the client's Bind, and the
// transaction status the session reports following the server's ReadyForQuery.
#include "session/pooled_server.h"

#include "session_harness.h"

namespace pgwarden::daemon::test {
namespace {

TEST(PooledServer, WithoutAConnectionItKeepsTheStatusAndTheMode) {
  session::PooledServer s;
  EXPECT_FALSE(s);
  EXPECT_EQ(s.conn(), nullptr);
  EXPECT_EQ(s.detach(), nullptr);
  EXPECT_TRUE(s.idle());
  s.readyForQuery('T');  // a status with no connection to tell: only the session's changes
  EXPECT_EQ(s.txStatus(), 'T');
  EXPECT_FALSE(s.idle());
  EXPECT_FALSE(s.transactionPooled());
  s.setTransactionPooled(true);
  EXPECT_TRUE(s.transactionPooled());
  s.setStartupParams({{"TimeZone", "UTC"}});
  ASSERT_EQ(s.startupParams().size(), 1u);
  EXPECT_EQ(s.startupParams()[0].second, "UTC");
  s.waitStarted(1000);
  EXPECT_EQ(s.waitedNs(1500), 500u);
}

TEST(PooledServer, AFailedParseWithoutAConnectionForgetsNothingItDoesNotHave) {
  session::PooledServer s;
  s.setTransactionPooled(true);
  EXPECT_FALSE(s.hasStatement("s1"));
  EXPECT_FALSE(s.hasStatement(""));  // the unnamed statement is never "already there"
  session::ReplyQueue::Pending p(session::ReplyQueue::Expect::kParse);
  p.statement().name = "s1";
  s.forgetFailedParse(p);
  s.closeStatement("s1");
  EXPECT_FALSE(s.hasStatement("s1"));
}

class PooledServerTest : public SessionHarness {
 protected:
  void startPooled() {
    start("  agents: {}\npool:\n  mode: transaction\n");
    login();
  }
};

TEST_F(PooledServerTest, ANamedStatementRunsUnderPgwardensNameOnTheConnection) {
  startPooled();
  EXPECT_STREQ(session_->poolModeName(), "transaction");
  std::string o;
  protocol::writeParse(o, "s1", "SELECT 1", {});
  protocol::BindMsg b;
  b.statement = "s1";
  protocol::writeBind(o, b);
  protocol::writeExecute(o, "", 0);
  protocol::writeSync(o);
  client_->send(o);
  const auto sent = serverReadsUntil('S');
  ASSERT_EQ(types(sent), "PBES");
  // Parse and Bind both name the connection's statement, not the client's "s1".
  const std::string server_name(sent[0].body.c_str());
  EXPECT_NE(server_name, "s1");
  EXPECT_FALSE(server_name.empty());
  const std::string bind_statement(sent[1].body.c_str() + 1);  // after the unnamed portal
  EXPECT_EQ(bind_statement, server_name);
  std::string answer;
  protocol::writeParseComplete(answer);
  protocol::writeBindComplete(answer);
  protocol::writeDataRow(answer, {std::string_view("1")});
  protocol::writeCommandComplete(answer, "SELECT 1");
  protocol::writeReadyForQuery(answer, 'I');
  server_.send(answer);
  EXPECT_EQ(types(clientReadsUntil('Z')), "12DCZ");
}

TEST_F(PooledServerTest, TheSessionsTransactionStatusFollowsTheServer) {
  startPooled();
  EXPECT_FALSE(session_->inTransaction());
  std::string q;
  protocol::writeQuery(q, "BEGIN");
  client_->send(q);
  ASSERT_EQ(serverReadsUntil('Q').back().type, 'Q');
  std::string answer;
  protocol::writeCommandComplete(answer, "BEGIN");
  protocol::writeReadyForQuery(answer, 'T');
  server_.send(answer);
  const auto got = clientReadsUntil('Z');
  ASSERT_EQ(got.back().type, 'Z');
  EXPECT_EQ(got.back().body, "T");
  EXPECT_TRUE(session_->inTransaction());
  EXPECT_NE(session_->serverId(), 0u);  // held while the transaction is open
}

}  // namespace
}  // namespace pgwarden::daemon::test
