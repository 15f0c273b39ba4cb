// studio: every page rendered from a real SQLite store holding the report tests' seed (the
// conversations newest first, a timeline in order with its warning, each report with its chart
// and links), and the requests answered without the store (assets, redirect, 404).
#include "studio/studio.h"

#include <gtest/gtest.h>

#include "history/recorder.h"
#include "history/report_reader.h"
#include "history/test_util.h"
#include "studio/pages.h"

namespace pgwarden::studio {
namespace {

using net::HttpRequest;

class StudioPagesOnSqlite : public ::testing::Test {
 protected:
  void SetUp() override {
    history::HistoryConfig c;
    c.store = "sqlite";
    c.path = dir_.file("history.db");
    c.flush_interval = std::chrono::milliseconds(10);
    auto rec = history::makeRecorder(c);
    for (auto& r : history::test::reportSeed(now_us_)) ASSERT_TRUE(rec->submit(std::move(r)));
    rec->shutdown(std::chrono::seconds(5));
    auto reader = history::openReportReader("sqlite", c.path);
    ASSERT_TRUE(reader.ok()) << reader.error();
    reader_ = std::move(*reader);
  }

  net::HttpResponse get(const std::string& path, const std::string& query = "") {
    return renderPage(*reader_, path, query, now_us_);
  }

  history::test::TempDir dir_;
  const int64_t now_us_ = history::test::nowUs();
  std::unique_ptr<history::ReportReader> reader_;
};

size_t at(const std::string& body, const std::string& what) {
  const size_t p = body.find(what);
  EXPECT_NE(p, std::string::npos) << what;
  return p;
}

TEST_F(StudioPagesOnSqlite, ConversationsNewestFirstWithinTheRange) {
  const auto r = get("/studio/");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  // The psql session (18 minutes ago) first, c1 (55) last; c9 is older than 24 hours.
  EXPECT_LT(at(r.body, ">session:i1:77<"), at(r.body, ">c4<"));
  EXPECT_LT(at(r.body, ">c4<"), at(r.body, ">c3<"));
  EXPECT_LT(at(r.body, ">c2<"), at(r.body, ">c1<"));
  EXPECT_EQ(r.body.find(">c9<"), std::string::npos);
  EXPECT_NE(get("/studio/", "since=30d").body.find(">c9<"), std::string::npos);
  // Filters.
  const auto denied = get("/studio/", "code=require_predicate");
  EXPECT_NE(denied.body.find(">c3<"), std::string::npos);
  EXPECT_EQ(denied.body.find(">c1<"), std::string::npos);
  const auto warned = get("/studio/", "code=UNKNOWN_VALUE");
  EXPECT_NE(warned.body.find(">c1<"), std::string::npos);
  EXPECT_EQ(warned.body.find(">c3<"), std::string::npos);
  const auto agent = get("/studio/", "agent=agent-c2");
  EXPECT_NE(agent.body.find(">c2<"), std::string::npos);
  EXPECT_EQ(agent.body.find(">c1<"), std::string::npos);
  EXPECT_EQ(get("/studio/", "since=never").status, 400);
}

TEST_F(StudioPagesOnSqlite, TimelineInOrderWithTheWarningExpanded) {
  const auto r = get("/studio/conversation", "id=c1");
  ASSERT_EQ(r.status, 200) << r.body;
  const char* texts[] = {"&#39;late&#39;", "&#39;Late&#39;", "&#39;LATE&#39;", "&#39;overdue&#39;"};
  size_t last = 0;
  for (const char* t : texts) {
    const size_t p = r.body.find(t, last);
    ASSERT_NE(p, std::string::npos) << t;
    last = p;
  }
  EXPECT_NE(r.body.find("UNKNOWN_VALUE</b>"), std::string::npos);
  EXPECT_NE(r.body.find("no status &#39;late&#39;"), std::string::npos);
  const auto session = get("/studio/conversation", "id=session%3Ai1%3A77");
  EXPECT_NE(session.body.find("3 statement(s)"), std::string::npos) << session.body;
  EXPECT_EQ(get("/studio/conversation", "").status, 400);
}

TEST_F(StudioPagesOnSqlite, ReportsWithChartsAndLinks) {
  const auto retries = get("/studio/retries");
  ASSERT_EQ(retries.status, 200) << retries.body;
  EXPECT_NE(retries.body.find("<svg"), std::string::npos);
  EXPECT_NE(retries.body.find("href=\"/studio/conversation?id=c1&amp;since=24h\""),
            std::string::npos);
  const auto repeats = get("/studio/repeats");
  EXPECT_NE(repeats.body.find("href=\"/studio/?since=24h&amp;fingerprint=f1\""), std::string::npos);
  const auto denials = get("/studio/denials");
  EXPECT_NE(denials.body.find("require_predicate"), std::string::npos);
  EXPECT_NE(denials.body.find("<rect"), std::string::npos);
  const auto zeros = get("/studio/zeros");
  EXPECT_NE(zeros.body.find("public.orders"), std::string::npos);
  EXPECT_EQ(get("/studio/nothing").status, 404);
}

TEST(StudioStatic, AssetsRedirectAndUnknownPaths) {
  HttpRequest req;
  req.method = "GET";
  req.path = "/studio/studio.js";
  auto js = staticAnswer(req);
  ASSERT_TRUE(js);
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  req.path = "/studio";
  EXPECT_EQ(staticAnswer(req)->status, 301);
  req.path = "/studio/../metrics";
  EXPECT_EQ(staticAnswer(req)->status, 404);
  req.path = "/studio/retries";
  EXPECT_FALSE(staticAnswer(req));
  bool csp = false;
  for (const auto& [k, v] : js->headers) csp |= k == "Content-Security-Policy";
  EXPECT_TRUE(csp);
}

}  // namespace
}  // namespace pgwarden::studio
