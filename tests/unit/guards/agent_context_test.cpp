// Agent context: sqlcommenter comments (first or last, percent-encoded, never inside literals),
// SET/RESET/SHOW pgwarden.* recognition, and the ctx document scripts and services receive.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "guards/agent_context.h"
#include "analysis/analysis.h"
#include "budgets/budget.h"

namespace pgwarden::guards {
namespace {

TEST(SqlComment, TrailingComment) {
  const auto o = parseSqlComment("SELECT 1 /* conversation_id='c-42',agent_id='planner' */");
  ASSERT_TRUE(o.any());
  EXPECT_EQ(o.conversation_id.value_or("?"), "c-42");
  EXPECT_EQ(o.agent_id.value_or("?"), "planner");
  EXPECT_FALSE(o.query_intent);
}

TEST(SqlComment, LeadingCommentAndTrailingSemicolon) {
  const auto o = parseSqlComment("  /*agent_id='a1'*/ SELECT * FROM t WHERE x = 1;  ");
  EXPECT_EQ(o.agent_id.value_or("?"), "a1");
  const auto p = parseSqlComment("SELECT 1 /*query_intent='lookup'*/ ;\n");
  EXPECT_EQ(p.query_intent.value_or("?"), "lookup");
}

TEST(SqlComment, PercentEncodedValuesAndEscapedQuote) {
  const auto o = parseSqlComment("SELECT 1 /*agent_id='plan%20ner%2Fv2',conversation_id='it\\'s'*/");
  EXPECT_EQ(o.agent_id.value_or("?"), "plan ner/v2");
  EXPECT_EQ(o.conversation_id.value_or("?"), "it's");
}

TEST(SqlComment, UnknownKeysSkippedKnownKept) {
  const auto o = parseSqlComment(
      "SELECT 1 /*framework='django%3A4.2',traceparent='00-abc-def-01',conversation_id='c%2D7'*/");
  EXPECT_EQ(o.conversation_id.value_or("?"), "c-7");
  EXPECT_FALSE(o.agent_id);
}

TEST(SqlComment, CaseInsensitiveKeys) {
  EXPECT_EQ(parseSqlComment("SELECT 1 /*Agent_ID='x'*/").agent_id.value_or("?"), "x");
}

TEST(SqlComment, CommentsInsideLiteralsAreNotComments) {
  EXPECT_FALSE(parseSqlComment("SELECT '/* agent_id=''x'' */'").any());
  EXPECT_FALSE(parseSqlComment("SELECT $$ /*agent_id='x'*/ $$").any());
  EXPECT_FALSE(parseSqlComment("SELECT \"/*agent_id='x'*/\" FROM t").any());
  EXPECT_FALSE(parseSqlComment("SELECT 1 -- /*agent_id='x'*/").any());
}

TEST(SqlComment, MiddleCommentIgnored) {
  EXPECT_FALSE(parseSqlComment("SELECT /*agent_id='x'*/ 1").any());
}

TEST(SqlComment, NestedCommentIsOneComment) {
  // PostgreSQL comments nest; the whole run is one comment, and not sqlcommenter-shaped.
  EXPECT_FALSE(parseSqlComment("SELECT 1 /* outer /* agent_id='x' */ */").any());
}

TEST(SqlComment, NoBlockCommentNoOverrides) {
  EXPECT_FALSE(parseSqlComment("SELECT 1 -- agent_id='a'").agent_id);
  EXPECT_FALSE(parseSqlComment("SELECT '/' || '*' AS x").agent_id);
  EXPECT_TRUE(parseSqlComment("SELECT 1 /*agent_id='a'*/").agent_id);
}

TEST(SqlComment, NotSqlcommenterShaped) {
  EXPECT_FALSE(parseSqlComment("SELECT 1 /* just a note */").any());
  EXPECT_FALSE(parseSqlComment("SELECT 1 /* agent_id=planner */").any());
  EXPECT_FALSE(parseSqlComment("SELECT 1 /* agent_id='unterminated */").any());
  EXPECT_FALSE(parseSqlComment("SELECT 1").any());
  EXPECT_FALSE(parseSqlComment("").any());
  EXPECT_FALSE(parseSqlComment("SELECT 1 /* unterminated").any());
}

TEST(SqlComment, BadValuesSkipped) {
  EXPECT_FALSE(parseSqlComment("SELECT 1 /*agent_id='a%0Ab'*/").agent_id);  // newline
  EXPECT_FALSE(parseSqlComment("SELECT 1 /*agent_id='" + std::string(300, 'x') + "'*/").agent_id);
  EXPECT_FALSE(parseSqlComment("SELECT 1 /*agent_id='a%zz'*/").agent_id);  // bad escape
}

TEST(SqlComment, FirstCommentWinsWhenBothPresent) {
  const auto o = parseSqlComment("/*agent_id='first'*/ SELECT 1 /*agent_id='last'*/");
  EXPECT_EQ(o.agent_id.value_or("?"), "first");
  // A leading comment that is not sqlcommenter-shaped leaves the trailing one in force.
  const auto p = parseSqlComment("/* report query */ SELECT 1 /*agent_id='last'*/");
  EXPECT_EQ(p.agent_id.value_or("?"), "last");
}

TEST(PercentDecode, Cases) {
  EXPECT_EQ(percentDecode("a%41b").value_or("?"), "aAb");
  EXPECT_EQ(percentDecode("a+b").value_or("?"), "a+b");
  EXPECT_FALSE(percentDecode("a%4"));
  EXPECT_FALSE(percentDecode("%g1"));
}

TEST(AgentCommand, SetForms) {
  for (const char* sql : {"SET pgwarden.agent_id = 'planner'", "set pgwarden.agent_id to 'planner'",
                          "SET SESSION pgwarden.agent_id = 'planner';", "SET \"pgwarden\".\"agent_id\" = 'planner'",
                          "  /* c */ SET pgwarden.AGENT_ID = planner ; ", "SET pgwarden.agent_id = E'planner'"}) {
    const AgentCommand c = parseAgentCommand(sql);
    EXPECT_EQ(c.kind, AgentCommand::Kind::kSet) << sql << " " << c.error;
    EXPECT_EQ(c.key, AgentKey::kAgentId) << sql;
    EXPECT_EQ(c.value, "planner") << sql;
    EXPECT_STREQ(agentCommandTag(c), "SET");
  }
  const AgentCommand l = parseAgentCommand("SET LOCAL pgwarden.conversation_id = 'c-1'");
  EXPECT_EQ(l.kind, AgentCommand::Kind::kSet);
  EXPECT_TRUE(l.local);
  EXPECT_EQ(l.key, AgentKey::kConversationId);
  const AgentCommand q = parseAgentCommand("SET pgwarden.query_intent TO 'aggregation'");
  EXPECT_EQ(q.key, AgentKey::kQueryIntent);
  EXPECT_EQ(q.value, "aggregation");
  EXPECT_EQ(parseAgentCommand("SET pgwarden.conversation_id = 42").value, "42");
  EXPECT_EQ(parseAgentCommand("SET pgwarden.agent_id = 'it''s'").value, "it's");
  EXPECT_EQ(parseAgentCommand("SET pgwarden.agent_id = ''").value, "");
}

TEST(AgentCommand, ResetShowAndDefault) {
  EXPECT_EQ(parseAgentCommand("RESET pgwarden.agent_id").kind, AgentCommand::Kind::kReset);
  EXPECT_EQ(parseAgentCommand("SET pgwarden.agent_id TO DEFAULT").kind, AgentCommand::Kind::kReset);
  const AgentCommand s = parseAgentCommand("show pgwarden.conversation_id;");
  EXPECT_EQ(s.kind, AgentCommand::Kind::kShow);
  EXPECT_EQ(s.key, AgentKey::kConversationId);
  EXPECT_STREQ(agentCommandTag(s), "SHOW");
  EXPECT_STREQ(agentCommandTag(parseAgentCommand("RESET pgwarden.agent_id")), "RESET");
}

// The namespace is found in any case before anything is lexed: mixed case and a namespace that
// only a comment or the first bytes of the text hold still reach the full parse.
TEST(AgentCommand, NamespaceInAnyCase) {
  for (const char* sql : {"SET PgWaRdEn.agent_id = 'planner'", "SET PGWARDEN.AGENT_ID TO 'planner'",
                          "/* x */SET\tpGwArDeN .agent_id='planner'"}) {
    const AgentCommand c = parseAgentCommand(sql);
    EXPECT_EQ(c.kind, AgentCommand::Kind::kSet) << sql << " " << c.error;
    EXPECT_EQ(c.value, "planner") << sql;
  }
  // White space of every kind and comments may come before the command's first word.
  for (const char* sql : {"\n\t\r\f\vset pgwarden.agent_id = 'planner'", "-- c\nSET pgwarden.agent_id = 'planner'",
                          "/* a */ /* b */ ShOw pgwarden.agent_id", "reset pgwarden.agent_id"}) {
    EXPECT_NE(parseAgentCommand(sql).kind, AgentCommand::Kind::kNone) << sql;
  }
  EXPECT_EQ(parseAgentCommand("pgwarden").kind, AgentCommand::Kind::kNone);
  EXPECT_EQ(parseAgentCommand("SHOW \"PGWARDEN\".agent_id").kind, AgentCommand::Kind::kNone);
}

TEST(AgentCommand, OtherStatementsAreNotOurs) {
  for (const char* sql : {"SET search_path = public", "SHOW statement_timeout", "SELECT 'SET pgwarden.agent_id = 1'",
                          "SET pgwardenx.agent_id = 'a'", "RESET ALL", "", "  ;", "SET", "SELECT 1",
                          "SET application_name = 'pgwarden.agent_id'", "SETTINGS pgwarden.agent_id = 'a'",
                          "SELECT pgwarden.agent_id", "(SET pgwarden.agent_id = 'a')", "\"SET\" pgwarden.agent_id = 'a'",
                          "SHOWS pgwarden.agent_id", "select 1 -- SET pgwarden.agent_id = 'a'"}) {
    EXPECT_EQ(parseAgentCommand(sql).kind, AgentCommand::Kind::kNone) << sql;
  }
}

TEST(AgentCommand, OurNamespaceButInvalidIsAnErrorNotForwarded) {
  const AgentCommand u = parseAgentCommand("SET pgwarden.budget = '100'");
  EXPECT_EQ(u.kind, AgentCommand::Kind::kError);
  EXPECT_EQ(u.sqlstate, "42704");
  EXPECT_NE(u.error.find("pgwarden.agent_id"), std::string::npos);
  EXPECT_EQ(parseAgentCommand("SHOW pgwarden.nothing").sqlstate, "42704");
  EXPECT_EQ(parseAgentCommand("SET pgwarden.agent_id = 'a'; SELECT 1").kind, AgentCommand::Kind::kError);
  EXPECT_EQ(parseAgentCommand("SET pgwarden.agent_id 'a'").kind, AgentCommand::Kind::kError);
  EXPECT_EQ(parseAgentCommand("SET pgwarden.agent_id = 'a', 'b'").kind, AgentCommand::Kind::kError);
  const AgentCommand longv = parseAgentCommand("SET pgwarden.agent_id = '" + std::string(257, 'a') + "'");
  EXPECT_EQ(longv.kind, AgentCommand::Kind::kError);
  EXPECT_EQ(longv.sqlstate, "22023");
  EXPECT_EQ(parseAgentCommand("SET pgwarden.agent_id = E'a\\nb'").sqlstate, "22023");
  EXPECT_EQ(parseAgentCommand("SET pgwarden.agent_id = 'unterminated").kind, AgentCommand::Kind::kNone);
}

TEST(ContextDoc, CarriesTheStatementAndWhoAsks) {
  const std::string sql =
      "SELECT s.status, count(*) FROM public.fct_shipments s JOIN dim_region r ON r.region = s.region "
      "WHERE s.ship_date > now() - interval '1 day' GROUP BY 1 LIMIT 10";
  const auto analysis = analysis::analyzeUncached(sql);
  ASSERT_TRUE(analysis->ok);
  RequestContext ctx;
  ctx.user = "agent";
  ctx.database = "analytics";
  ctx.group = "agents";
  ctx.agent_id = "planner";
  ctx.conversation_id = "c-42";
  ctx.application_name = "app";
  ctx.client_addr = "127.0.0.1";
  budgets::BudgetLedger ledger;
  ctx.budgets = &ledger;
  GroupSettings group{"agents", {}, {}, {}};
  const GuardInput in{*analysis, sql, ctx, nullptr, group};
  const ContextDoc d = buildContextDoc(in);
  EXPECT_EQ(d.user, "agent");
  EXPECT_EQ(d.agent_id, "planner");
  EXPECT_EQ(d.conversation_id, "c-42");
  EXPECT_EQ(d.query_intent_sent, "");
  EXPECT_FALSE(d.query_intent_inferred.empty());
  EXPECT_EQ(d.query_intent, d.query_intent_inferred);
  ASSERT_EQ(d.kinds.size(), 1u);
  EXPECT_EQ(d.kinds[0], "select");
  ASSERT_EQ(d.tables.size(), 2u);
  EXPECT_EQ(d.tables[0], "public.fct_shipments");
  EXPECT_EQ(d.limit.value_or(-1), 10);
  EXPECT_TRUE(d.has_budget);

  const auto j = nlohmann::json::parse(contextJson(d));
  EXPECT_EQ(j["sql"], sql);
  EXPECT_EQ(j["agent_id"], "planner");
  EXPECT_EQ(j["conversation_id"], "c-42");
  EXPECT_EQ(j["group"], "agents");
  EXPECT_EQ(j["limit"], 10);
  EXPECT_TRUE(j["has_predicate"].contains("public.fct_shipments"));
  EXPECT_EQ(j["budget"]["statements"], 0);
  EXPECT_EQ(j["statements"][0]["kind"], "select");
  EXPECT_EQ(j["fingerprint"], analysis->fingerprint_hex);

  ctx.query_intent = "lookup";
  const GuardInput in2{*analysis, sql, ctx, nullptr, group};
  EXPECT_EQ(buildContextDoc(in2).query_intent, "lookup");
}

TEST(ContextDoc, InvalidUtf8NeverThrows) {
  const std::string sql = "SELECT '\xff\xfe'";
  const auto analysis = analysis::analyzeUncached(sql);
  RequestContext ctx;
  GroupSettings group{"g", {}, {}, {}};
  const GuardInput in{*analysis, sql, ctx, nullptr, group};
  EXPECT_NO_THROW((void)contextJson(buildContextDoc(in)));
}

}  // namespace
}  // namespace pgwarden::guards
