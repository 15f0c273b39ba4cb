// SOFT_DELETED_ROWS: a read of a table whose soft-delete column marks rows deleted, without naming
// it; and the relative time ranges and NULL aggregates OUT_OF_RANGE and UNKNOWN_VALUE now read.
#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::Row;
using screentest::rows;
using screentest::Screening;

Row softCol(std::string table, std::string column, std::string type, std::string category,
            std::string not_null, std::string null_frac, std::string mcv = "",
            std::string freqs = "", std::string histogram = "") {
  return {"public", table,     column, type,    category, "",       "",        mcv, freqs,
          "-0.5",   histogram, "true", "false", "false",  not_null, null_frac, ""};
}

std::shared_ptr<const analysis::TableStatsSnapshot> softStats() {
  return analysis::TableStatsSnapshot::fromRows(
      {{"public", "users", "2000", "id", "integer"},
       {"public", "products", "600", "id", "integer"},
       {"public", "events", "100", "id", "integer"},
       {"public", "orders", "3000", "id", "integer"}},
      {softCol("users", "deleted_at", "timestamp with time zone", "D", "false", "0.875"),
       softCol("users", "tenant_id", "integer", "N", "true", "0"),
       {"public", "users", "id", "integer", "N", "", "", "", "", "-1", "", "true", "true", "true",
        "true", "0", ""},
       softCol("products", "is_deleted", "boolean", "B", "true", "0", "{f,t}", "{0.83,0.17}"),
       softCol("events", "deleted_at", "timestamp with time zone", "D", "false", "1"),
       softCol("orders", "created_at", "timestamp without time zone", "D", "true", "0", "", "",
               "{\"2024-01-01 01:37:00\",\"2024-07-21 05:00:00\"}"),
       softCol("orders", "status", "text", "S", "true", "0", "{NEW,PAID}", "{0.5,0.5}")});
}

TEST(SoftDeletedRows, AReadThatDoesNotFilterTheDeletedRows) {
  Screening r;
  r.stats = softStats();
  r.result = rows(1);
  auto vs = r.screen("SELECT count(*) FROM users WHERE tenant_id = 3");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"SOFT_DELETED_ROWS"});
  EXPECT_EQ(vs[0].hint, "SELECT count(*) FROM users WHERE deleted_at IS NULL AND tenant_id = 3");
  EXPECT_NE(vs[0].detail.find("\"deleted_rows\":250"), std::string::npos) << vs[0].detail;
  vs = r.screen("SELECT u.tenant_id, count(*) FROM users u GROUP BY u.tenant_id");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"SOFT_DELETED_ROWS"});
  EXPECT_EQ(
      vs[0].hint,
      "SELECT u.tenant_id, count(*) FROM users u WHERE deleted_at IS NULL GROUP BY u.tenant_id");
  vs = r.screen("SELECT * FROM products p JOIN users u ON u.tenant_id = p.id");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"SOFT_DELETED_ROWS"});
  EXPECT_EQ(vs[0].hint,
            "SELECT * FROM products p JOIN users u ON u.tenant_id = p.id WHERE NOT p.is_deleted");
  // Filtered (or read) by the column, a table without deleted rows, an OR (no simple edit): the
  // first two silent, the last flagged without a hint.
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM users WHERE tenant_id = 3 AND deleted_at IS NULL").empty());
  EXPECT_TRUE(r.screen("SELECT count(*) FROM products WHERE NOT is_deleted").empty());
  EXPECT_TRUE(r.screen("SELECT count(*) FROM events").empty());
  vs = r.screen("SELECT count(*) FROM users WHERE tenant_id = 3 OR tenant_id = 4");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"SOFT_DELETED_ROWS"});
  EXPECT_EQ(vs[0].hint, "");
}

// A lookup by a unique key names its row: the table's share of deleted rows says nothing of
// whether that row is one, so no warning. Several keys, a range or a key that is not unique still
// read whatever the share says.
TEST(SoftDeletedRows, ALookupByAUniqueKeyIsLeftAlone) {
  Screening r;
  r.stats = softStats();
  r.result = rows(1);
  EXPECT_TRUE(r.screen("SELECT * FROM users WHERE id = 42").empty());
  EXPECT_TRUE(r.screen("SELECT u.tenant_id FROM users u WHERE u.id = 42 AND u.tenant_id = 3").empty());
  for (const char* sql : {"SELECT * FROM users WHERE id IN (1, 2)", "SELECT * FROM users WHERE id > 5",
                          "SELECT * FROM users WHERE tenant_id = 3",
                          "SELECT * FROM users WHERE id = 42 OR tenant_id = 3"}) {
    SCOPED_TRACE(sql);
    EXPECT_EQ(codesOf(r.screen(sql)), std::vector<std::string>{"SOFT_DELETED_ROWS"});
  }
}

TEST(OutOfRange, RelativeRangesAreFoldedToTodaysDate) {
  Screening r;
  r.stats = softStats();
  r.result = rows(0);
  auto vs = r.screen("SELECT count(*) FROM orders WHERE created_at >= now() - interval '30 days'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"OUT_OF_RANGE"});
  EXPECT_NE(vs[0].detail.find("\"relative\":true"), std::string::npos) << vs[0].detail;
  EXPECT_EQ(codesOf(r.screen("SELECT count(*) FROM orders WHERE created_at > current_date - 7")),
            std::vector<std::string>{"OUT_OF_RANGE"});
  // A range that ends a year ago ends after the data starts: silent.
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM orders WHERE created_at < now() - interval '1 year'").empty());
  // An interval the screen does not read: silent.
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM orders WHERE created_at > now() - interval '3 fortnights'")
          .empty());
}

TEST(OutOfRange, ASingleNullAggregateIsAnEmptyResult) {
  Screening r;
  r.stats = softStats();
  r.result = rows(1);
  const std::string sql = "SELECT max(created_at) FROM orders WHERE created_at > '2025-01-01'";
  EXPECT_TRUE(r.screen(sql).empty());
  r.result.single_null = true;
  EXPECT_EQ(codesOf(r.screen(sql)), std::vector<std::string>{"OUT_OF_RANGE"});
}

}  // namespace
}  // namespace pgwarden::screens
