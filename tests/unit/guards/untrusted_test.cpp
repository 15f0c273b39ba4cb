#include "guards/untrusted.h"

#include <gtest/gtest.h>

#include "guard_test_util.h"
#include "guards/codes.h"
#include "guards/guard.h"

namespace pgwarden::guards {
namespace {

const UntrustedContent& rule() {
  static const auto groups = test::groupsFromYaml(R"(
g:
  untrusted_content:
    columns: [public.reviews.body, support.tickets.*]
    refuse_tools: [issue_*]
)");
  return *groups.at("g")->untrusted();
}

std::optional<std::string> reads(const std::string& sql) {
  const auto a = analysis::analyzeUncached(sql);
  EXPECT_TRUE(a->ok) << sql;
  for (const auto& st : a->statements) {
    if (auto r = rule().reads(st, sql)) return r;
  }
  return std::nullopt;
}

TEST(UntrustedContent, AReadOfTheColumnOrOfEveryColumnCounts) {
  EXPECT_EQ(reads("SELECT body FROM reviews"), "reviews.body");
  EXPECT_EQ(reads("SELECT r.id, upper(r.BODY) FROM public.reviews r"), "public.reviews.body");
  EXPECT_EQ(reads("SELECT * FROM reviews WHERE id = 1"), "reviews.body");
  EXPECT_EQ(reads("SELECT r.* FROM reviews r"), "reviews.body");
  EXPECT_EQ(reads("TABLE reviews"), "reviews.body");
  EXPECT_EQ(reads("SELECT id FROM support.tickets"), "support.tickets.*");
  EXPECT_EQ(reads("SELECT x FROM (SELECT \"body\" AS x FROM reviews) s"), "reviews.body");
}

TEST(UntrustedContent, NamesInConstantsAndOtherTablesDoNotCount) {
  EXPECT_FALSE(reads("SELECT id, stars FROM reviews"));
  EXPECT_FALSE(reads("SELECT count(*) FROM reviews"));
  EXPECT_FALSE(reads("SELECT id FROM reviews WHERE stars = 'body' -- body"));
  EXPECT_FALSE(reads("SELECT body FROM posts"));
  EXPECT_FALSE(reads("SELECT id FROM other.reviews"));
  EXPECT_FALSE(reads("SELECT $$ body $$ FROM reviews"));
}

TEST(UntrustedContent, RefusesWritesWebhooksAndTheNamedTools) {
  const auto write =
      analysis::analyzeUncached("UPDATE orders SET status = 'refunded' WHERE id = 2");
  const auto read = analysis::analyzeUncached("SELECT 1");
  const auto ddl = analysis::analyzeUncached("CREATE TABLE x (a int)");
  const auto cte = analysis::analyzeUncached(
      "WITH d AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM d");
  EXPECT_EQ(rule().refused(*write, false, ""), "writes");
  EXPECT_EQ(rule().refused(*ddl, false, ""), "writes");
  EXPECT_EQ(rule().refused(*cte, false, ""), "writes");
  EXPECT_FALSE(rule().refused(*read, false, "query"));
  EXPECT_EQ(rule().refused(*read, true, ""), "webhooks");
  EXPECT_EQ(rule().refused(*read, false, "issue_refund"), "tool issue_refund");
  const auto only_writes = test::groupsFromYaml(R"(
g:
  untrusted_content: {columns: [public.reviews.body], refuse: [writes]}
)");
  EXPECT_FALSE(only_writes.at("g")->untrusted()->refused(*read, true, ""));
}

TEST(UntrustedContent, ConfigNamesWhatIsWrong) {
  EXPECT_THROW(test::groupsFromYaml("g: {untrusted_content: {columns: [reviews.body]}}"),
               std::exception);
  EXPECT_THROW(test::groupsFromYaml("g: {untrusted_content: {columns: [a.b.c], refuse: [email]}}"),
               std::exception);
  EXPECT_THROW(test::groupsFromYaml("g: {untrusted_content: {columns: []}}"), std::exception);
  EXPECT_THROW(test::groupsFromYaml("g: {untrusted_content: {columns: [a.b.c], other: 1}}"),
               std::exception);
}

TEST(ConversationMarks, KeepTheFirstReadAndForgetTheOldestPastTheLimit) {
  ConversationMarks marks(2);
  const auto a = ConversationMarks::key("g", "alice", "c1", 7);
  EXPECT_NE(a, ConversationMarks::key("g", "bob", "c1", 7));
  EXPECT_NE(ConversationMarks::key("g", "alice", "", 7),
            ConversationMarks::key("g", "alice", "", 8));
  EXPECT_EQ(a, ConversationMarks::key("g", "alice", "c1", 8));  // the session does not matter
  EXPECT_FALSE(marks.find(a));
  marks.mark(a, "public.reviews.body", 100);
  marks.mark(a, "support.tickets.*", 200);
  EXPECT_EQ(marks.find(a)->what, "public.reviews.body");
  EXPECT_EQ(marks.find(a)->at_unix, 100);
  marks.mark("b", "x", 1);
  marks.mark("c", "x", 1);
  EXPECT_FALSE(marks.find(a));
  EXPECT_TRUE(marks.find("c"));
  EXPECT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks.forgotten(), 1u);
}

TEST(UntrustedContent, TheDenialSaysWhyAndWhatToDoNext) {
  const GuardResult r = untrustedFlowDenial({"public.reviews.body", 0}, "writes");
  EXPECT_EQ(r.code, "UNTRUSTED_FLOW");
  EXPECT_NE(r.message.find("public.reviews.body"), std::string::npos);
  EXPECT_NE(r.message.find("1970-01-01T00:00:00Z"), std::string::npos);
  EXPECT_NE(r.facts.json(r.code).find("\"next_step\""), std::string::npos);
  EXPECT_EQ(codes::sqlstateFor(r.code), "42501");
  EXPECT_EQ(codes::sqlstateFor(untrustedReadWarning("x").code), "01000");
}

}  // namespace
}  // namespace pgwarden::guards
