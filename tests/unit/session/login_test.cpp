// The login state of a client session: a refusal kept for the StartupMessage, the password
// exchange dropped with its outcome, the first statistics wait taken once; and, through a session
// on the harness, the cancel key the client is given and a carried setting the server refuses at
// attach, which refuses the login with the server's reason.
#include "session/login.h"

#include "session_harness.h"

namespace pgwarden::daemon::test {
namespace {

TEST(Login, ARefusalWaitsForTheStartupMessage) {
  session::Login login;
  EXPECT_FALSE(login.reject());
  login.rejectAfterStartup({"53300", "too many", metrics::RejectReason::kMaxConnections});
  ASSERT_TRUE(login.reject());
  EXPECT_EQ(login.reject()->sqlstate, "53300");
  EXPECT_EQ(login.reject()->reason, metrics::RejectReason::kMaxConnections);
}

TEST(Login, ThePasswordExchangeEndsWithItsOutcome) {
  session::Login login;
  EXPECT_EQ(login.auth(), nullptr);
  const session::UnknownUserAuth unknown{config::AuthMethod::kScramSha256, 4096, 16, "salt"};
  session::ClientAuth& auth = login.startAuth(
      std::make_unique<session::ClientAuth>(nullptr, "nobody", unknown, "no such user"));
  EXPECT_EQ(login.auth(), &auth);
  login.authOver();
  EXPECT_EQ(login.auth(), nullptr);
}

TEST(Login, TheFirstStatisticsWaitIsTakenOnceAndEndsOnce) {
  session::Login login;
  EXPECT_TRUE(login.firstAttachEnd());
  EXPECT_FALSE(login.firstAttachEnd());        // a second attach end goes straight on
  EXPECT_FALSE(login.statsWaitOver(0, true));  // no wait begun: nothing ends
  login.waitForStats(1000);
  EXPECT_FALSE(login.statsWaitOver(1001, false));
  EXPECT_TRUE(login.statsWaitOver(1001, true));   // loaded
  EXPECT_FALSE(login.statsWaitOver(1002, true));  // once
  login.waitForStats(1000);
  EXPECT_TRUE(login.statsWaitOver(1000 + session::kStatsWaitMs, false));  // its time is up
}

class LoginTest : public SessionHarness {};

TEST_F(LoginTest, TheClientGetsTheCancelKeyTheHostHandedOut) {
  start("  agents: {}\n");
  std::string startup;
  protocol::writeStartup(startup, {{"user", "agent"}, {"database", "appdb"}});
  client_->send(startup);
  serverAcceptsLogin();
  const auto got = clientReadsUntil('Z');
  std::string key;
  for (const auto& m : got) {
    if (m.type == 'K') key = m.body;
  }
  std::string expected;
  protocol::writeBackendKeyData(expected, 1001, 2002);  // FakeHost's, not the server's 4242/77
  EXPECT_EQ(key, expected.substr(5));
}

TEST_F(LoginTest, ASettingTheServerRefusesAtAttachRefusesTheLoginWithTheServersReason) {
  start("  agents: {}\n");
  std::string startup;
  protocol::writeStartup(startup,
                         {{"user", "agent"}, {"database", "appdb"}, {"TimeZone", "Mars/Olympus"}});
  client_->send(startup);
  serverAcceptsLogin({{"server_version", "15.4"}, {"TimeZone", "UTC"}});
  const auto sent = serverReadsUntil('Q');
  ASSERT_EQ(sent.back().type, 'Q');
  EXPECT_NE(sent.back().body.find("Mars/Olympus"), std::string::npos) << sent.back().body;
  std::string refused;
  protocol::writeError(refused, "ERROR", "22023", "invalid value for parameter \"TimeZone\"");
  protocol::writeReadyForQuery(refused, 'I');
  server_.send(refused);
  const auto got = clientReadsUntil('E');
  ASSERT_EQ(got.back().type, 'E');
  EXPECT_NE(got.back().body.find("22023"), std::string::npos);
  EXPECT_NE(got.back().body.find("FATAL"), std::string::npos);
  EXPECT_NE(got.back().body.find("invalid value for parameter"), std::string::npos);
  for (const auto& m : got) EXPECT_NE(m.type, 'Z') << "the client was told it is ready";
  EXPECT_TRUE(runUntil([&] { return client_->eof(); }));
}

}  // namespace
}  // namespace pgwarden::daemon::test
