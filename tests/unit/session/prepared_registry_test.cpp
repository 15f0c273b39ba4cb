// The prepared-statement registry: one bound over statements and over portals, a Parse that the
// server refuses restoring what the name meant, a Close forgetting all of a statement, pgwarden's
// own unnamed statement replacing the server's, and the portal entry kept across transactions.
#include "session/prepared_registry.h"

#include <gtest/gtest.h>

namespace pgwarden::daemon {
namespace {

std::shared_ptr<const session::StatementPlan> plan(const char* fingerprint) {
  auto p = std::make_shared<session::StatementPlan>();
  p->fingerprint = fingerprint;
  return p;
}

TEST(PreparedRegistry, NamedStatementsAreBoundedAndTheUnnamedOneNeverCounts) {
  session::PreparedRegistry r(2);
  EXPECT_FALSE(r.statementsFull("a"));
  r.prepare("a", plan("1"));
  r.prepare("b", plan("2"));
  EXPECT_TRUE(r.statementsFull("c"));
  EXPECT_FALSE(r.statementsFull("a")) << "preparing a name again adds nothing";
  EXPECT_FALSE(r.statementsFull("")) << "the unnamed statement never counts";
  r.closeStatement("a");
  EXPECT_FALSE(r.statementsFull("c"));
}

TEST(PreparedRegistry, AParseTheServerRefusesLeavesTheNameAsItWas) {
  session::PreparedRegistry r(8);
  r.prepare("s", plan("old"));
  session::PreparedRegistry::Previous before = r.prepare("s", plan("new"));
  ASSERT_TRUE(before.had);
  EXPECT_EQ(r.plan("s")->fingerprint, "new");
  r.restore("s", std::move(before));
  EXPECT_EQ(r.plan("s")->fingerprint, "old");

  session::PreparedRegistry::Previous none = r.prepare("fresh", plan("x"));
  EXPECT_FALSE(none.had);
  r.restore("fresh", std::move(none));
  EXPECT_FALSE(r.hasStatement("fresh"));
  EXPECT_EQ(r.plan("fresh"), nullptr);
}

TEST(PreparedRegistry, ACloseForgetsEverythingKnownOfTheStatement) {
  session::PreparedRegistry r(8);
  r.prepare("s", plan("1"));
  r.setTypes("s", {23, 25});
  guards::AgentOverrides ov;
  ov.agent_id = "bot";
  r.setOverrides("s", ov);
  session::GateVerdict::Write w;
  w.table = "public.t";
  w.at_execute = true;
  r.setWrite("s", &w);
  ASSERT_NE(r.types("s"), nullptr);
  ASSERT_NE(r.overrides("s"), nullptr);
  EXPECT_EQ(r.write("s").table, "public.t");
  r.closeStatement("s");
  EXPECT_EQ(r.plan("s"), nullptr);
  EXPECT_EQ(r.types("s"), nullptr);
  EXPECT_EQ(r.overrides("s"), nullptr);
  EXPECT_FALSE(r.write("s").at_execute);
}

TEST(PreparedRegistry, NoOverridesOrWriteMeansNoneKept) {
  session::PreparedRegistry r(8);
  guards::AgentOverrides ov;
  ov.query_intent = "look";
  r.setOverrides("s", ov);
  r.setOverrides("s", guards::AgentOverrides{});  // prepared again without a comment
  EXPECT_EQ(r.overrides("s"), nullptr);
  session::GateVerdict::Write w;
  w.wrap = true;
  r.setWrite("s", &w);
  r.setWrite("s", nullptr);
  EXPECT_FALSE(r.write("s").wrap);
}

TEST(PreparedRegistry, PgwardensOwnUnnamedStatementReplacesTheServersOne) {
  session::PreparedRegistry r(8);
  r.prepare("", plan("server"));
  r.setTypes("", {23});
  guards::AgentCommand cmd;
  cmd.kind = guards::AgentCommand::Kind::kShow;
  r.addAgentStatement("", cmd);
  EXPECT_EQ(r.plan(""), nullptr);
  EXPECT_EQ(r.types(""), nullptr);
  ASSERT_NE(r.agentStatement(""), nullptr);
  EXPECT_TRUE(r.anyAgent());
  // A named one leaves a server statement of another name alone.
  r.prepare("s", plan("server"));
  r.addAgentStatement("mine", cmd);
  EXPECT_NE(r.plan("s"), nullptr);
  EXPECT_TRUE(r.eraseAgentStatement("mine"));
  EXPECT_FALSE(r.eraseAgentStatement("mine"));
  EXPECT_TRUE(r.agentStatementsFull("x") == false);
}

TEST(PreparedRegistry, PortalsAreBoundedAndOneEntryOutlivesItsTransactionWithItsStorage) {
  session::PreparedRegistry r(2);
  EXPECT_EQ(r.spareParams(), nullptr);
  auto params = std::make_shared<session::ScreenParams>(session::ScreenParams{std::string("42")});
  const session::ScreenParams* storage = params.get();
  r.addPortal("p1", session::Portal{plan("1"), nullptr, {}, std::move(params), {}});
  r.addPortal("p2", session::Portal{plan("2"), nullptr, {}, nullptr, {}});
  EXPECT_TRUE(r.portalsFull());
  ASSERT_NE(r.portal("p1"), nullptr);
  EXPECT_EQ(r.portal("p1")->plan->fingerprint, "1");
  int seen = 0;
  r.forEachPortal([&](session::Portal&) { ++seen; });
  EXPECT_EQ(seen, 2);
  // The transaction ends: every portal goes, one entry is kept with nothing it pointed to.
  r.erasePortal("p2");
  r.endPortals();
  EXPECT_FALSE(r.anyPortal());
  EXPECT_EQ(r.portal("p1"), nullptr);
  std::shared_ptr<session::ScreenParams> reused = r.spareParams();
  ASSERT_NE(reused, nullptr);
  EXPECT_EQ(reused.get(), storage) << "the values' storage is kept for the next Bind";
  r.addPortal("next", session::Portal{plan("3"), nullptr, {}, std::move(reused), {}});
  ASSERT_NE(r.portal("next"), nullptr);
  EXPECT_EQ(r.portal("next")->plan->fingerprint, "3");
  EXPECT_FALSE(r.portalsFull());
}

TEST(PreparedRegistry, PgwardensOwnPortalsHaveTheirOwnBound) {
  session::PreparedRegistry r(1);
  guards::AgentCommand cmd;
  r.addAgentPortal("a", session::AgentPortal{cmd, 1});
  EXPECT_TRUE(r.agentPortalsFull());
  ASSERT_NE(r.agentPortal("a"), nullptr);
  EXPECT_EQ(r.agentPortal("a")->format, 1);
  EXPECT_TRUE(r.hasAgentPortal("a"));
  EXPECT_FALSE(r.portalsFull()) << "the server's portals are counted apart";
  EXPECT_TRUE(r.eraseAgentPortal("a"));
  EXPECT_FALSE(r.anyAgent());
}

}  // namespace
}  // namespace pgwarden::daemon
