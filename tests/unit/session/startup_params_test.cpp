// Startup parameter filtering: what passes, what pgwarden keeps for itself, what is refused.
#include "session/startup_params.h"

#include <gtest/gtest.h>

using namespace pgwarden::session;
using namespace pgwarden;

namespace {

std::string valueOf(const ParamList& l, const std::string& name) {
  for (const auto& [n, v] : l) {
    if (n == name) return v;
  }
  return "<absent>";
}

}  // namespace

TEST(Options, SplitsLikePostgres) {
  auto r = parseOptions("-c agent_id=a1  -cconversation_id=c2\t--query-intent=lookup");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], (std::pair<std::string, std::string>{"agent_id", "a1"}));
  EXPECT_EQ((*r)[1], (std::pair<std::string, std::string>{"conversation_id", "c2"}));
  // --name=value: dashes in the name stand for underscores, not in the value.
  EXPECT_EQ((*r)[2], (std::pair<std::string, std::string>{"query_intent", "lookup"}));
}

TEST(Options, BackslashEscapesSpaces) {
  auto r = parseOptions(R"(-c application_name=my\ app -c agent_id=x\\y)");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].second, "my app");
  EXPECT_EQ((*r)[1].second, "x\\y");
}

TEST(Options, EmptyIsNothing) {
  auto r = parseOptions("   ");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST(Options, RefusesOtherSwitches) {
  for (const char* bad : {"-B 100", "-d 5", "-e", "-F", "--single", "-c", "-c novalue", "-c =x"}) {
    auto r = parseOptions(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  auto r = parseOptions("-B 100");
  EXPECT_NE(r.error().find("-B"), std::string::npos) << r.error();
}

TEST(StartupFilter, OrdinaryClientParametersPass) {
  auto r = filterStartupParams({{"user", "agent"},
                                {"database", "analytics"},
                                {"client_encoding", "UTF8"},
                                {"datestyle", "ISO"},
                                {"TimeZone", "UTC"},
                                {"IntervalStyle", "iso_8601"},
                                {"extra_float_digits", "3"},
                                {"application_name", "PostgreSQL JDBC Driver"}});
  ASSERT_TRUE(r.startup) << r.refusal.message;
  EXPECT_EQ(r.startup->user, "agent");
  EXPECT_EQ(r.startup->database, "analytics");
  EXPECT_EQ(r.startup->application_name, "PostgreSQL JDBC Driver");
  // Canonical spelling whatever the client's case.
  EXPECT_EQ(valueOf(r.startup->params, "DateStyle"), "ISO");
  EXPECT_EQ(valueOf(r.startup->params, "extra_float_digits"), "3");
  EXPECT_EQ(r.startup->params.size(), 6u);
}

// pgwarden reads statements as UTF-8: any spelling of UTF8 is taken, under the name the server
// reports, so the connection's own UTF8 needs no SET.
TEST(StartupFilter, ClientEncodingIsUtf8UnderItsReportedName) {
  for (const char* v : {"UTF8", "utf8", "utf-8", "unicode"}) {
    auto r = filterStartupParams({{"user", "agent"}, {"client_encoding", v}});
    ASSERT_TRUE(r.startup) << v << ": " << r.refusal.message;
    EXPECT_EQ(valueOf(r.startup->params, "client_encoding"), "UTF8") << v;
  }
  auto r = filterStartupParams({{"user", "agent"}, {"client_encoding", "SJIS"}});
  ASSERT_FALSE(r.startup);
  EXPECT_NE(r.refusal.message.find("accepts only client_encoding UTF8"), std::string::npos)
      << r.refusal.message;
}

TEST(StartupFilter, DatabaseDefaultsToUser) {
  auto r = filterStartupParams({{"user", "agent"}});
  ASSERT_TRUE(r.startup);
  EXPECT_EQ(r.startup->database, "agent");
}

TEST(StartupFilter, MissingUserIsRefusedLikePostgres) {
  auto r = filterStartupParams({{"database", "x"}});
  ASSERT_FALSE(r.startup);
  EXPECT_EQ(r.refusal.sqlstate, "28000");
  EXPECT_EQ(r.refusal.message, "no PostgreSQL user name specified in startup packet");
}

TEST(StartupFilter, ContextKeysAreTakenAndNeverForwarded) {
  auto r = filterStartupParams({{"user", "agent"},
                                {"agent_id", "planner"},
                                {"pgwarden.conversation_id", "c-42"},
                                {"options", "-c query_intent=aggregation"}});
  ASSERT_TRUE(r.startup) << r.refusal.message;
  EXPECT_EQ(r.startup->agent_id, "planner");
  EXPECT_EQ(r.startup->conversation_id, "c-42");
  EXPECT_EQ(r.startup->query_intent, "aggregation");
  EXPECT_TRUE(r.startup->params.empty());
}

TEST(StartupFilter, ContextViaOptions) {
  auto r = filterStartupParams(
      {{"user", "agent"}, {"options", "-c agent_id=a -c conversation_id=b"}});
  ASSERT_TRUE(r.startup) << r.refusal.message;
  EXPECT_EQ(r.startup->agent_id, "a");
  EXPECT_EQ(r.startup->conversation_id, "b");
}

TEST(StartupFilter, OverlongContextValueRefused) {
  auto r = filterStartupParams({{"user", "agent"}, {"agent_id", std::string(300, 'x')}});
  ASSERT_FALSE(r.startup);
  EXPECT_NE(r.refusal.message.find("agent_id"), std::string::npos);
}

TEST(StartupFilter, ServerSettingsAreRefusedByName) {
  struct Case {
    ParamList params;
    std::string named;
  };
  const Case cases[] = {
      {{{"user", "a"}, {"options", "-c default_transaction_read_only=off"}},
       "default_transaction_read_only"},
      {{{"user", "a"}, {"statement_timeout", "0"}}, "statement_timeout"},
      {{{"user", "a"}, {"replication", "database"}}, "replication"},
      {{{"user", "a"}, {"options", "--lock-timeout=0"}}, "lock_timeout"},
      {{{"user", "a"}, {"session_authorization", "postgres"}}, "session_authorization"},
      {{{"user", "a"}, {"role", "postgres"}}, "role"},
      {{{"user", "a"}, {"options", "-c transaction_read_only=off"}}, "transaction_read_only"},
      {{{"user", "a"}, {"standard_conforming_strings", "off"}}, "standard_conforming_strings"},
      {{{"user", "a"}, {"options", "-c standard_conforming_strings=off"}},
       "standard_conforming_strings"},
      {{{"user", "a"}, {"options", "--standard-conforming-strings=off"}},
       "standard_conforming_strings"},
      {{{"user", "a"}, {"client_encoding", "SJIS"}}, "SJIS"},
      {{{"user", "a"}, {"options", "-c client_encoding=LATIN1"}}, "LATIN1"},
      {{{"user", "a"}, {"client_encoding", "SQL_ASCII"}}, "SQL_ASCII"},
  };
  for (const auto& c : cases) {
    auto r = filterStartupParams(c.params);
    ASSERT_FALSE(r.startup) << c.named;
    EXPECT_EQ(r.refusal.sqlstate, "42501");
    EXPECT_NE(r.refusal.message.find("\"" + c.named + "\""), std::string::npos)
        << r.refusal.message;
  }
}

TEST(StartupFilter, SearchPathIsSetAsideForTheGroupCheck) {
  auto r = filterStartupParams({{"user", "a"}, {"search_path", "sales, public"}});
  ASSERT_TRUE(r.startup);
  ASSERT_TRUE(r.startup->search_path);
  EXPECT_EQ(*r.startup->search_path, "sales, public");
  EXPECT_TRUE(r.startup->params.empty());
  auto o = filterStartupParams({{"user", "a"}, {"options", "-c search_path=x"}});
  ASSERT_TRUE(o.startup);
  EXPECT_EQ(*o.startup->search_path, "x");
}

TEST(StartupFilter, ProtocolOptionsAreListedNotRefused) {
  auto r = filterStartupParams({{"user", "a"}, {"_pq_.compression", "on"}});
  ASSERT_TRUE(r.startup);
  ASSERT_EQ(r.startup->unrecognized_protocol_options.size(), 1u);
  EXPECT_EQ(r.startup->unrecognized_protocol_options[0], "_pq_.compression");
}

TEST(StartupFilter, LastValueWins) {
  auto r = filterStartupParams(
      {{"user", "a"}, {"application_name", "one"}, {"options", "-c application_name=two"}});
  ASSERT_TRUE(r.startup);
  EXPECT_EQ(valueOf(r.startup->params, "application_name"), "two");
  EXPECT_EQ(r.startup->application_name, "two");
}

TEST(StartupFilter, CanonicalNames) {
  EXPECT_STREQ(canonicalClientParam("TIMEZONE"), "TimeZone");
  EXPECT_STREQ(canonicalClientParam("intervalstyle"), "IntervalStyle");
  EXPECT_EQ(canonicalClientParam("search_path"), nullptr);
  EXPECT_EQ(canonicalClientParam("work_mem"), nullptr);
  EXPECT_STREQ(contextKey("PGWARDEN.AGENT_ID"), "agent_id");
  EXPECT_EQ(contextKey("pgwarden."), nullptr);
}
