// ClientSession driven frame by frame, both ends played by the test (session_harness.h): a
// pipeline with a denial in the middle, a server error mid-pipeline, a suspended portal, a cancel,
// the client vanishing mid-result and mid-Query (every statement of the text recorded), and the
// server vanishing mid-result. Each checks what the client reads, what reaches the server, and
// that every statement is recorded once.
#include "session_harness.h"

namespace pgwarden::daemon::test {
namespace {

const char* const kGroups = "  agents:\n    guards:\n      - kind: read_only\n";

std::string extended(std::string_view sql, int32_t max_rows = 0) {
  std::string o;
  protocol::writeParse(o, "", sql, {});
  protocol::writeBind(o, protocol::BindMsg{});
  protocol::writeDescribe(o, 'P', "");
  protocol::writeExecute(o, "", max_rows);
  return o;
}

std::string sync() {
  std::string o;
  protocol::writeSync(o);
  return o;
}

// The server's answer to one Parse/Bind/Describe/Execute of a one-column SELECT.
std::string rowsAnswer(int rows, bool complete = true) {
  std::string o;
  protocol::writeParseComplete(o);
  protocol::writeBindComplete(o);
  protocol::writeRowDescription(o, {protocol::ColumnDesc{"n", 23, 4, -1}});
  for (int i = 0; i < rows; ++i) protocol::writeDataRow(o, {std::string_view("1")});
  if (complete) {
    protocol::writeCommandComplete(o, "SELECT " + std::to_string(rows));
  } else {
    protocol::writePortalSuspended(o);
  }
  return o;
}

std::string ready(char status = 'I') {
  std::string o;
  protocol::writeReadyForQuery(o, status);
  return o;
}

class ClientSessionTest : public SessionHarness {
 protected:
  // The one record of `sql` (a test failure when there is none, or more than one).
  const history::Record& recordOf(std::string_view sql) {
    const history::Record* found = nullptr;
    for (const auto& r : host_->records) {
      if (r.sql_text != sql) continue;
      EXPECT_EQ(found, nullptr) << sql << " recorded twice";
      found = &r;
    }
    static const history::Record kNone;
    EXPECT_NE(found, nullptr) << sql << " not recorded";
    return found ? *found : kNone;
  }
};

TEST_F(ClientSessionTest, DenialInTheMiddleOfAPipelineSkipsTheRestUntilSync) {
  start(kGroups);
  login();
  client_->send(extended("SELECT 1") + extended("INSERT INTO t VALUES (1)") + extended("SELECT 2") + sync());
  // Only the statement before the denial reaches the server, closed by a Sync of pgwarden's.
  auto to_server = serverReadsUntil('S');
  EXPECT_EQ(types(to_server), "PBDEHS");
  EXPECT_NE(to_server[0].body.find("SELECT 1"), std::string::npos);
  server_.send(rowsAnswer(1) + ready());
  auto got = clientReadsUntil('Z');
  // The first statement's answer, the denial in its place, and nothing of the third.
  EXPECT_EQ(types(got), "12TDCEZ");
  EXPECT_NE(got[5].body.find("READ_ONLY"), std::string::npos) << got[5].body;
  EXPECT_NE(got[5].body.find("INSERT"), std::string::npos);
  char t = 0;
  std::string b;
  EXPECT_FALSE(server_.takeMessage(t, b)) << "a statement after the denial reached the server";
  // Recorded once each: the select that ran and the denied insert; the skipped one never ran.
  // Each statement recorded once: the select that ran, the denied insert, and the one after it
  // as not executed (it never reached the server).
  ASSERT_TRUE(runUntil([&] { return host_->records.size() >= 3; }));
  ASSERT_EQ(host_->records.size(), 3u);
  EXPECT_EQ(recordOf("SELECT 1").outcome, history::Outcome::kOk);
  EXPECT_EQ(recordOf("INSERT INTO t VALUES (1)").outcome, history::Outcome::kDenied);
  EXPECT_EQ(recordOf("INSERT INTO t VALUES (1)").deny_code, "READ_ONLY");
  const history::Record& skipped = recordOf("SELECT 2");
  EXPECT_EQ(skipped.outcome, history::Outcome::kError);
  EXPECT_NE(skipped.error_message.find("not executed"), std::string::npos) << skipped.error_message;
}

TEST_F(ClientSessionTest, ServerErrorMidPipelineEndsTheBatchAtSync) {
  start(kGroups);
  login();
  client_->send(extended("SELECT 1") + extended("SELECT 1/0") + extended("SELECT 3") + sync());
  auto to_server = serverReadsUntil('S');
  EXPECT_EQ(types(to_server), "PBDEPBDEPBDES");
  // The server fails the second and skips the third until the Sync, as PostgreSQL does.
  std::string o = rowsAnswer(1);
  protocol::writeParseComplete(o);
  protocol::writeBindComplete(o);
  protocol::writeRowDescription(o, {protocol::ColumnDesc{"x", 23, 4, -1}});
  protocol::writeError(o, "ERROR", "22012", "division by zero");
  server_.send(o + ready());
  auto got = clientReadsUntil('Z');
  EXPECT_EQ(types(got), "12TDC12TEZ");
  ASSERT_TRUE(runUntil([&] { return host_->records.size() >= 3; }));
  EXPECT_EQ(host_->records.size(), 3u);
  EXPECT_EQ(host_->records[0].outcome, history::Outcome::kOk);
  EXPECT_EQ(host_->records[1].outcome, history::Outcome::kError);
  EXPECT_EQ(host_->records[1].sqlstate, "22012");
  // The third never ran: it is accounted for, not silently lost.
  EXPECT_NE(host_->records[2].outcome, history::Outcome::kOk);
}

TEST_F(ClientSessionTest, SuspendedPortalResumesWithTheNextExecute) {
  start(kGroups);
  login();
  client_->send(extended("SELECT n FROM generate_series(1, 3) n", 2) + sync());
  EXPECT_EQ(types(serverReadsUntil('S')), "PBDES");
  server_.send(rowsAnswer(2, false) + ready('T'));
  auto got = clientReadsUntil('Z');
  EXPECT_EQ(types(got), "12TDDsZ");
  std::string more;
  protocol::writeExecute(more, "", 2);
  client_->send(more + sync());
  EXPECT_EQ(types(serverReadsUntil('S')), "ES");
  std::string o;
  protocol::writeDataRow(o, {std::string_view("3")});
  protocol::writeCommandComplete(o, "SELECT 1");
  server_.send(o + ready());
  EXPECT_EQ(types(clientReadsUntil('Z')), "DCZ");
  ASSERT_TRUE(runUntil([&] { return !host_->records.empty(); }));
  EXPECT_EQ(host_->records.size(), 1u);
  EXPECT_EQ(host_->records[0].rows_returned, 3);
}

TEST_F(ClientSessionTest, CancelReachesTheServerBackendOfTheRunningStatement) {
  start(kGroups);
  login();
  client_->send(extended("SELECT pg_sleep(10)") + sync());
  EXPECT_EQ(types(serverReadsUntil('S')), "PBDES");
  session_->cancelFromClient();
  ASSERT_EQ(host_->cancels.size(), 1u);
  EXPECT_EQ(host_->cancels[0], std::make_pair(int32_t{4242}, int32_t{77}));
  std::string o;
  protocol::writeParseComplete(o);
  protocol::writeBindComplete(o);
  protocol::writeRowDescription(o, {protocol::ColumnDesc{"pg_sleep", 2278, 4, -1}});
  protocol::writeError(o, "ERROR", "57014", "canceling statement due to user request");
  server_.send(o + ready());
  auto got = clientReadsUntil('Z');
  EXPECT_EQ(types(got), "12TEZ");
  ASSERT_TRUE(runUntil([&] { return !host_->records.empty(); }));
  EXPECT_EQ(host_->records[0].outcome, history::Outcome::kCancelled);
}

TEST_F(ClientSessionTest, ClientVanishingMidResultCancelsAndRecordsTheStatement) {
  start(kGroups);
  login();
  client_->send(extended("SELECT n FROM generate_series(1, 1000000) n") + sync());
  EXPECT_EQ(types(serverReadsUntil('S')), "PBDES");
  server_.send(rowsAnswer(50, false).substr(0, 200));  // part of the result
  client_->hangUp();
  ASSERT_TRUE(runUntil([&] { return host_->closed > 0; }));
  // The server is asked to stop, and the statement is in history once, as aborted.
  EXPECT_EQ(host_->cancels.size(), 1u);
  ASSERT_TRUE(runUntil([&] { return !host_->records.empty(); }));
  EXPECT_EQ(host_->records.size(), 1u);
  EXPECT_EQ(host_->records[0].outcome, history::Outcome::kClientGone);
}

TEST_F(ClientSessionTest, ClientVanishingMidQueryRecordsEveryStatementOfItsTextOnce) {
  start(kGroups);
  login();
  std::string q;
  protocol::writeQuery(q, "SELECT 1; SELECT 2; SELECT 3");
  client_->send(q);
  EXPECT_EQ(types(serverReadsUntil('Q')), "Q");
  std::string o;
  protocol::writeRowDescription(o, {protocol::ColumnDesc{"n", 23, 4, -1}});
  protocol::writeDataRow(o, {std::string_view("1")});
  protocol::writeCommandComplete(o, "SELECT 1");
  server_.send(o);  // the first statement's answer, then nothing more
  ASSERT_TRUE(runUntil([&] { return !host_->records.empty(); }));
  client_->hangUp();
  ASSERT_TRUE(runUntil([&] { return host_->closed > 0; }));
  // The first statement ran; the one the server was at and the one after it end with the client.
  ASSERT_TRUE(runUntil([&] { return host_->records.size() >= 3; }));
  ASSERT_EQ(host_->records.size(), 3u);
  EXPECT_EQ(host_->records[0].outcome, history::Outcome::kOk);
  EXPECT_EQ(host_->records[1].outcome, history::Outcome::kClientGone);
  EXPECT_EQ(host_->records[2].outcome, history::Outcome::kClientGone);
  EXPECT_NE(host_->records[1].sql_text, host_->records[2].sql_text);
}

TEST_F(ClientSessionTest, ServerVanishingMidResultTellsTheClientAndRecordsTheStatement) {
  start(kGroups);
  login();
  client_->send(extended("SELECT n FROM generate_series(1, 1000000) n") + sync());
  EXPECT_EQ(types(serverReadsUntil('S')), "PBDES");
  server_.send(rowsAnswer(5, false).substr(0, 60));
  ASSERT_TRUE(runUntil([&] { return server_.allSent(); }));
  server_.hangUp();
  auto got = clientReadsUntil('E');
  ASSERT_EQ(got.back().type, 'E') << types(got);
  EXPECT_NE(got.back().body.find("08006"), std::string::npos) << got.back().body;
  ASSERT_TRUE(runUntil([&] { return !host_->records.empty(); }));
  EXPECT_EQ(host_->records.size(), 1u);
  EXPECT_EQ(host_->records[0].outcome, history::Outcome::kAborted);
}

}  // namespace
}  // namespace pgwarden::daemon::test
