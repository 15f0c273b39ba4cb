// guards: the security corpus (tests/security/bypass_corpus.tsv) must be denied, each line with its
// expected code, and the ordinary reads (tests/security/allowed_reads.tsv) must pass, both against
// the `agents` group of the example config with the sample table's catalog snapshot.
#include <map>
#include <set>

#include "guards/codes.h"
#include "tests/unit/guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

using test::decidedByPlan;

const PolicyGroup& agents() {
  const auto& groups = test::exampleGroups();
  auto it = groups.find("agents");
  EXPECT_NE(it, groups.end());
  return *it->second;
}

TEST(SecurityCorpus, EveryBypassAttemptIsDeniedWithItsCode) {
  const auto lines = test::loadCorpus("tests/security/bypass_corpus.tsv");
  ASSERT_GE(lines.size(), 80u);
  const auto stats = test::sampleStats();
  std::set<std::string> known(std::begin(codes::kAll), std::end(codes::kAll));
  for (const auto& l : lines) {
    SCOPED_TRACE("bypass_corpus.tsv:" + std::to_string(l.number) + " [" + l.category + "] " + l.sql);
    EXPECT_TRUE(known.count(l.expect)) << "unknown code " << l.expect;
    for (bool extended : {false, true}) {
      const Decision d = test::evaluate(agents(), l.sql, stats.get(), extended);
      if (decidedByPlan(l.expect)) {
        EXPECT_FALSE(d.denied) << "denied before its plan: " << d.deny.code << " " << d.deny.message;
        EXPECT_TRUE(d.explain_sql.has_value()) << "not held for a plan";
        continue;
      }
      ASSERT_TRUE(d.denied) << "allowed" << (d.rewritten_sql ? " as: " + *d.rewritten_sql : "");
      EXPECT_EQ(d.deny.code, l.expect) << d.deny.message;
      EXPECT_EQ(d.deny.action, Action::kDeny);
      EXPECT_FALSE(d.deny.message.empty());
      EXPECT_EQ(d.deny.sqlstate, std::string(codes::sqlstateFor(d.deny.code)));
      EXPECT_EQ(d.deny.detail.rfind("{\"code\":\"" + l.expect + "\"", 0), 0u) << d.deny.detail;
      EXPECT_FALSE(d.rewritten_sql.has_value());
      EXPECT_FALSE(d.explain_sql.has_value());
      ASSERT_FALSE(d.actions.empty());
      EXPECT_EQ(d.actions.back().code, d.deny.code);
    }
  }
}

TEST(SecurityCorpus, CoversEveryClassOfTheSecuritySuite) {
  std::map<std::string, int> per_category;
  for (const auto& l : test::loadCorpus("tests/security/bypass_corpus.tsv")) ++per_category[l.category];
  for (const char* c : {"multi_statement", "modifying_cte", "select_into", "locking", "protected_setting",
                        "read_write_transaction", "session_characteristics", "explain_analyze", "prepare",
                        "do_call", "create_function", "copy", "large_object", "file_access", "remote",
                        "signal", "sleep_series", "sequence", "advisory_lock", "listen_notify", "role",
                        "discard", "with_hold", "temp_table", "alter_system", "maintenance", "merge",
                        "lexical", "recursion", "secret_catalog", "trivial_predicate", "runaway_join"}) {
    EXPECT_GE(per_category[c], 2) << c;
  }
}

TEST(AllowedReads, OrdinaryAnalyticsReadsPass) {
  const auto lines = test::loadCorpus("tests/security/allowed_reads.tsv");
  ASSERT_GE(lines.size(), 40u);
  const auto stats = test::sampleStats();
  for (const auto& l : lines) {
    SCOPED_TRACE("allowed_reads.tsv:" + std::to_string(l.number) + " [" + l.category + "] " + l.sql);
    const Decision d = test::evaluate(agents(), l.sql, stats.get());
    ASSERT_FALSE(d.denied) << d.deny.code << ": " << d.deny.message;
    if (l.expect == "ALLOW") {
      EXPECT_FALSE(d.rewritten_sql.has_value()) << *d.rewritten_sql;
    } else if (l.expect == "CAPPED") {
      ASSERT_TRUE(d.rewritten_sql.has_value());
      EXPECT_EQ(d.max_rows, 1000);
      // The rewritten text is still one valid statement, capped at max_rows + 1.
      const auto again = analysis::analyzeUncached(*d.rewritten_sql);
      ASSERT_TRUE(again->ok) << again->error << "\n" << *d.rewritten_sql;
      ASSERT_EQ(again->statements.size(), 1u);
      EXPECT_EQ(again->statements[0].limit, analysis::LimitKind::kConstant);
      EXPECT_EQ(again->statements[0].limit_value, 1001);
    } else {
      ADD_FAILURE() << "unknown expectation " << l.expect;
    }
  }
}

}  // namespace
}  // namespace pgwarden::guards
