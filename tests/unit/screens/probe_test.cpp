// The screens' indexed probe: which empty reads it asks about (a value the statistics cannot
// decide, on a column an index leads), the query it sends, and what its answer makes the
// screens say (UNKNOWN_VALUE when no row holds the value; CONDITIONS_EXCLUDE's share of it).
#include "screens/probe.h"

#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::empty;
using screentest::rows;
using screentest::singleZero;

std::shared_ptr<const analysis::TableStatsSnapshot> usersStats() {
  // schema, table, column, type, category, enum, check, mcv, freqs, n_distinct, histogram,
  // analysed, unique, leads_btree, not null, null_frac, references
  auto col = [](std::string name, std::string type, std::string cat, std::string mcv,
                std::string freqs, std::string nd, std::string leads,
                std::string null_frac) -> std::vector<std::string> {
    return {"public", "users", name,   type,    cat,   "",      "",        mcv, freqs,
            nd,       "",      "true", "false", leads, "false", null_frac, ""};
  };
  return analysis::TableStatsSnapshot::fromRows(
      {{"public", "users", "20000", "id", "integer"}},
      {col("email", "text", "S", "", "", "-1", "true", "0"),
       col("nickname", "text", "S", "", "", "-1", "false", "0"),
       col("plan", "text", "S", "{free,pro}", "{0.5,0.5}", "2", "true", "0"),
       col("tenant_id", "integer", "N", "{1,2}", "{0.01,0.01}", "-0.05", "true", "0"),
       col("deleted_at", "timestamp with time zone", "D", "", "", "-0.9", "false", "0.875")});
}

struct Probing : screentest::Screening {
  Probing() { stats = usersStats(); }
  // The input the screens read of `sql`'s result (analysed anew), with `probe`'s answer.
  ScreenInput input(std::string_view sql, const ProbeAnswer* probe = nullptr) {
    analysis = analysis::analyzeUncached(sql);
    ScreenInput in;
    in.statement = &analysis->statements.at(0);
    in.sql = sql;
    in.result = result;
    in.stats = stats.get();
    in.params = &params;
    in.probe = probe;
    return in;
  }
  std::optional<ProbeRequest> request(std::string_view sql, int timeout_ms = 50) {
    return probeRequest(input(sql), timeout_ms);
  }
  std::vector<guards::Verdict> answered(std::string_view sql, int64_t probe_rows) {
    auto req = request(sql);
    EXPECT_TRUE(req) << sql;
    answer = ProbeAnswer{ProbeAnswer::State::kAnswered, req ? req->comparison : -1, probe_rows};
    return screenResult(input(sql, &answer));
  }
  ProbeAnswer answer;
};

TEST(ScreenProbe, AsksAboutAValueTheStatisticsCannotDecide) {
  Probing p;
  p.result = singleZero();
  auto req = p.request("SELECT count(*) FROM users WHERE deleted_at IS NULL AND email = 'a@b.c'");
  ASSERT_TRUE(req);
  EXPECT_EQ(p.analysis->statements[0].screen.comparisons.at(req->comparison).column, "email");
  EXPECT_EQ(req->sql,
            "SET LOCAL statement_timeout = 50; SET LOCAL enable_seqscan = off; SELECT count(*) "
            "FROM (SELECT 1 FROM \"public\".\"users\" WHERE \"email\" IN (E'a@b.c') LIMIT 1000) p");
  // A bound value is asked about as the Bind gave it.
  p.params = {std::string("x@y.z")};
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE email = $1"))
      << "a row whose id is 0 matched: nothing to ask";
  p.result = empty();
  req = p.request("SELECT id FROM users WHERE email = $1");
  ASSERT_TRUE(req);
  EXPECT_NE(req->sql.find("IN (E'x@y.z')"), std::string::npos) << req->sql;
}

TEST(ScreenProbe, AsksNothingWhereTheAnswerIsKnownOrTheIndexMissing) {
  Probing p;
  p.result = empty();
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE nickname = 'zed'"));  // no index leads it
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE plan = 'free'"));     // an MCV: it occurs
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE plan = 'gold'"));     // known: UNKNOWN_VALUE
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE tenant_id = 1"));     // an MCV
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE email ILIKE 'a@b.c'"));
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE email = 'a@b.c'", 0));  // the group's off
  p.result = rows(1);
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE email = 'a@b.c'"));  // something matched
  p.result = empty();
  p.params = {std::nullopt};
  EXPECT_FALSE(p.request("SELECT id FROM users WHERE email = $1"));  // a NULL or binary value
}

TEST(ScreenProbe, QueryQuotesWhateverTheNamesAndValuesHold) {
  EXPECT_EQ(
      probeQuery("my \"s\"", "t", "c", {"it's", "back\\slash"}, 20),
      "SET LOCAL statement_timeout = 20; SET LOCAL enable_seqscan = off; SELECT count(*) "
      "FROM (SELECT 1 FROM \"my \"\"s\"\"\".\"t\" WHERE \"c\" IN (E'it''s', E'back\\\\slash') "
      "LIMIT 1000) p");
}

TEST(ScreenProbe, ReadsTheCountAndNothingElse) {
  EXPECT_EQ(readProbeCount(std::string_view("0")), 0);
  EXPECT_EQ(readProbeCount(std::string_view("1000")), 1000);
  EXPECT_EQ(readProbeCount(std::string_view("1001")), -1);
  EXPECT_EQ(readProbeCount(std::string_view("-1")), -1);
  EXPECT_EQ(readProbeCount(std::string_view("7x")), -1);
  EXPECT_EQ(readProbeCount(std::nullopt), -1);
}

TEST(ScreenProbe, NoRowSaysTheValueIsUnknown) {
  Probing p;
  p.result = singleZero();
  const char* sql =
      "SELECT count(*) FROM users WHERE email = 'nobody@example.com' AND deleted_at IS NULL";
  auto vs = p.answered(sql, 0);
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_EQ(vs[0].message.rfind("email has no value 'nobody@example.com': an index lookup of "
                                "public.users found no row holding it.",
                                0),
            0u)
      << vs[0].message;
  EXPECT_EQ(vs[0].hint,
            "SELECT email FROM public.users WHERE lower(email) = lower('nobody@example.com') "
            "LIMIT 5");
  EXPECT_NE(vs[0].detail.find("\"source\":\"index_probe\""), std::string::npos) << vs[0].detail;
  // The value occurs: nothing to say.
  EXPECT_TRUE(p.answered(sql, 1).empty());
  // Unanswered (a timeout): nothing either.
  auto req = p.request(sql);
  p.answer = ProbeAnswer{ProbeAnswer::State::kUnanswered, req->comparison, -1};
  const ScreenInput in = p.input(sql, &p.answer);
  EXPECT_TRUE(screenResult(in).empty());
}

TEST(ScreenProbe, ItsCountIsAConditionsShare) {
  Probing p;
  p.result = singleZero();
  // 800 of 20000 users hold the address (a shared mailbox), 12.5% are deleted: 100 expected.
  auto vs = p.answered(
      "SELECT count(*) FROM users WHERE email = 'team@example.com' AND deleted_at IS NOT NULL",
      800);
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"CONDITIONS_EXCLUDE"});
  EXPECT_NE(vs[0].message.find("email = 'team@example.com': about 800"), std::string::npos)
      << vs[0].message;
  EXPECT_NE(vs[0].message.find("by the statistics and an index count"), std::string::npos);
  // One row alone is no evidence that the conditions exclude each other.
  EXPECT_TRUE(
      p.answered("SELECT count(*) FROM users WHERE email = 'u8@example.com' AND deleted_at IS NULL",
                 1)
          .empty());
}

}  // namespace
}  // namespace pgwarden::screens
