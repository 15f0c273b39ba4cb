// studio: the query string read into a filter (decoding, the bounded range, codes checked), and
// the SQL carrying every value as a parameter.
#include "studio/query.h"

#include <gtest/gtest.h>

namespace pgwarden::studio {
namespace {

TEST(StudioQuery, ParamsAreDecoded) {
  EXPECT_EQ(queryParam("a=1&id=c%2F1+x&b=", "id"), "c/1 x");
  EXPECT_EQ(queryParam("a=1&b=", "b"), "");
  EXPECT_EQ(queryParam("a=1", "z"), "");
  EXPECT_EQ(queryParam("id=%zz%4", "id"), "%zz%4");
  EXPECT_EQ(urlEncode("a b/\"<x>&"), "a%20b%2F%22%3Cx%3E%26");
}

TEST(StudioQuery, FilterRangeIsBoundedAndCodesChecked) {
  auto f = parseFilter("since=7d&agent=a1&code=UNKNOWN_VALUE&id=c1");
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->range, std::chrono::hours(24 * 7));
  EXPECT_EQ(f->agent, "a1");
  EXPECT_EQ(f->code, "UNKNOWN_VALUE");
  EXPECT_EQ(f->id, "c1");
  EXPECT_EQ(filterQuery(*f), "since=7d&agent=a1&code=UNKNOWN_VALUE");
  EXPECT_EQ(parseFilter("")->range, kDefaultRange);
  EXPECT_FALSE(parseFilter("since=400d").ok());
  EXPECT_FALSE(parseFilter("since=soon").ok());
  EXPECT_FALSE(parseFilter("code=x'%20OR%201=1").ok());
}

TEST(StudioQuery, ValuesAreParametersNeverText) {
  auto f = parseFilter("agent=a'%3B%20DROP&user=u&group=g&code=require_predicate");
  ASSERT_TRUE(f.ok());
  for (auto d : {history::Dialect::kSqlite, history::Dialect::kPostgres}) {
    const Sql s = conversationsSql(d, *f, 1'000'000'000'000'000);
    EXPECT_EQ(s.text.find("DROP"), std::string::npos);
    EXPECT_NE(s.text.find("started_at >= ?"), std::string::npos);
    // cutoff, agent, user, group, two for the code, limit
    EXPECT_EQ(s.params.size(), 7u);
  }
}

}  // namespace
}  // namespace pgwarden::studio
