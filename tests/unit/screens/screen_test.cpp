// The screens as a whole (screen.cpp): a group's result_screens turning a screen off or to deny,
// with the operator's reason, and which statements and results are worth screening at all.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "screening.h"
#include "screens/screen.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::empty;
using screentest::rows;
using screentest::Screening;
using screentest::singleZero;

TEST(Config, OffDenyAndReasonOverrides) {
  auto groups = guards::parsePolicyGroups(YAML::Load(R"(
g:
  result_screens: {UNKNOWN_VALUE: deny, OUT_OF_RANGE: off}
  reasons:
    UNKNOWN_VALUE: "No such {column}: {values}. Try one of {known_values}."
)"));
  Screening r;
  r.group = groups.at("g").get();
  r.result = singleZero();
  auto vs = r.screen("SELECT count(*) FROM fct_shipments WHERE status = 'late' AND ship_date > '2027-01-01'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_EQ(vs[0].action, guards::Action::kDeny);
  EXPECT_EQ(vs[0].message, "No such status: late. Try one of DELAYED, DELIVERED, RETURNED.");
  EXPECT_THROW(guards::parsePolicyGroups(YAML::Load("g: {result_screens: {NOPE: warn}}")), std::exception);
  EXPECT_THROW(guards::parsePolicyGroups(YAML::Load("g: {result_screens: {UNFILTERED: loud}}")), std::exception);
}

TEST(WorthScreening, OnlyShapesThatCanBeFlagged) {
  auto a = analysis::analyzeUncached(
      "SELECT id, status FROM fct_shipments WHERE id > 5 ORDER BY id LIMIT 5");
  // A range on a column is a comparison: worth a look (it may be out of range when empty).
  EXPECT_TRUE(worthScreening(a->statements[0]));
  EXPECT_FALSE(worthScreening(analysis::analyzeUncached("SELECT 1")->statements[0]));
  // pgbench -S: worth a look by shape, but one row that is not a zero cannot make any screen speak.
  const auto pgbench =
      analysis::analyzeUncached("SELECT abalance FROM pgbench_accounts WHERE aid = $1");
  EXPECT_TRUE(worthScreening(pgbench->statements[0]));
  // One row that is not a zero: only SOFT_DELETED_ROWS could speak, and only once some table of
  // the catalog has a soft-delete column (until then, pgbench -S is never screened).
  EXPECT_EQ(maySpeak(pgbench->statements[0], rows(1)), analysis::softDeleteColumnsSeen());
  ASSERT_TRUE(analysis::parseColumnRow({"public", "users", "deleted_at", "timestamp with time zone",
                                        "D", "", "", "", "", "-0.5", "", "true", "false", "false",
                                        "false", "0.9", ""}));
  EXPECT_TRUE(analysis::softDeleteColumnsSeen());
  EXPECT_TRUE(maySpeak(pgbench->statements[0], rows(1)));
  EXPECT_FALSE(
      maySpeak(analysis::analyzeUncached("SELECT 1 FROM t WHERE deleted_at IS NULL AND id = 3")
                   ->statements[0],
               rows(1)));
  EXPECT_TRUE(maySpeak(pgbench->statements[0], empty()));
  EXPECT_FALSE(
      worthScreening(analysis::analyzeUncached("SET search_path = public")->statements[0]));
  EXPECT_FALSE(
      worthScreening(analysis::analyzeUncached("SELECT count(*) FROM (VALUES (1)) v(x) GROUP BY x")
                         ->statements[0]));
}

}  // namespace
}  // namespace pgwarden::screens
