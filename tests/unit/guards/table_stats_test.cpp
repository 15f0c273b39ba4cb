// guards: the catalog snapshot (rows as the daemon reads them) and the catalog query itself,
// which must be a read every guarded group lets through.
#include "tests/unit/guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

TEST(TableStats, FromRowsSkipsBadRowsAndKeepsColumnTypesAligned) {
  const auto s = TableStatsSnapshot::fromRows({
      {"public", "a", "1500", "x,y,x", "date,bigint,date"},
      {"public", "b", "-1", "x"},
      {"public", "c", "12abc", "x"},
      {"public", "d"},
      {"", "e", "5", ""},
      {"s", "f", "0", ""},
      {"s", "g", "77", "k"},
  });
  EXPECT_EQ(s->size(), 3u);
  const TableStats* a = s->find("public", "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->estimated_rows, 1500);
  EXPECT_EQ(a->indexed_columns, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(a->indexed_column_types, (std::vector<std::string>{"date", "bigint"}));
  EXPECT_EQ(s->find("public", "b"), nullptr);
  EXPECT_EQ(s->find("public", "c"), nullptr);
  ASSERT_NE(s->find("s", "f"), nullptr);
  EXPECT_TRUE(s->find("s", "f")->indexed_columns.empty());
  ASSERT_NE(s->find("s", "g"), nullptr);
  EXPECT_EQ(s->find("s", "g")->indexed_column_types, std::vector<std::string>{""});
  EXPECT_EQ(s->find("S", "g"), nullptr);
}

TEST(TableStats, CatalogQueryIsAReadEveryGroupAllows) {
  const auto a = analyzeUncached(TableStatsSnapshot::catalogQuery());
  ASSERT_TRUE(a->ok) << a->error;
  ASSERT_EQ(a->statements.size(), 1u);
  const auto& st = a->statements[0];
  EXPECT_EQ(st.kind, StatementKind::kSelect);
  EXPECT_EQ(st.intent, Intent::kCatalog);
  for (const auto& r : st.relations) EXPECT_EQ(r.schema, "pg_catalog") << r.name;
  for (const auto& [name, group] : test::exampleGroups()) {
    RequestContext ctx;
    const Decision d = group->evaluate(*a, TableStatsSnapshot::catalogQuery(), ctx, nullptr);
    EXPECT_FALSE(d.denied) << name << ": " << d.deny.message;
  }
}

}  // namespace
}  // namespace pgwarden::guards
