// studio: pages rendered from hand-made rows full of hostile text (SQL, agent ids, guard reasons,
// MCP arguments, chart labels): nothing of it comes out as markup, and links stay /studio/ paths.
#include "studio/pages.h"

#include <gtest/gtest.h>

#include <regex>

namespace pgwarden::studio {
namespace {

using history::ReportCell;
using history::ReportKind;
using history::ReportTable;

const std::string kScript = "<script>alert(1)</script>";
const std::string kAttr = "\"><img src=x onerror=alert(2)>";
const std::string kJsUrl = "javascript:alert(3)";

ReportCell text(std::string s) { return ReportCell{std::move(s), false, false}; }
ReportCell number(std::string s) { return ReportCell{std::move(s), true, false}; }

// No element or attribute the payloads tried to make.
void expectInert(const std::string& html) {
  EXPECT_EQ(html.find("<script>alert"), std::string::npos) << html;
  EXPECT_EQ(html.find("<img"), std::string::npos) << html;
  EXPECT_EQ(html.find("onerror=alert(2)>"), std::string::npos) << html;
  EXPECT_EQ(html.find("href=\"javascript"), std::string::npos) << html;
  // The only script is the studio's own.
  size_t scripts = 0;
  for (size_t at = html.find("<script"); at != std::string::npos;
       at = html.find("<script", at + 1)) {
    ++scripts;
  }
  EXPECT_EQ(scripts, 1u) << html;
}

TEST(StudioPages, TimelineEscapesEveryValue) {
  ReportTable t;
  t.columns = {"n",
               "started_at",
               "agent_id",
               "user_name",
               "policy_group",
               "statement_kind",
               "outcome",
               "deny_code",
               "sqlstate",
               "error_message",
               "warnings",
               "guard_actions",
               "rows_returned",
               "rows_affected",
               "duration_us",
               "host",
               "tool_name",
               "tool_args",
               "sql_text"};
  t.rows.push_back(
      {number("1"), text("2026-12-06T10:00:00Z"), text(kAttr), text("agent"), text("agents"),
       text("select"), text("ok"), text(""), text(""), text(""), number("1"),
       text(R"([{"guard":"result_screen","action":"warn","code":"UNKNOWN_VALUE","reason":")" +
            std::string("<b>no</b> ") + R"(\"><img src=x>"}])"),
       number("1"), number("0"), number("2500"), text("10.0.0.2:5432"), text("query"),
       text(R"({"sql":")" + std::string("</code><script>alert(1)</script>") + "\"}"),
       text("SELECT '" + kScript + "' -- " + kAttr)});
  t.rows.push_back({number("2"), text("2026-12-06T10:00:01Z"), text(kAttr), text("agent"),
                    text("agents"), text("select"), text("denied"), text(kScript), text(""),
                    text(kScript), number("0"), text("not json <script>"), number("0"), number("0"),
                    number("100"), text(""), text(""), text(""), text(kJsUrl)});
  Filter f;
  f.id = kScript;
  const std::string html = timelinePage(f, t);
  expectInert(html);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("UNKNOWN_VALUE"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;no&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("MCP tool <b>query</b>"), std::string::npos);
  EXPECT_NE(html.find("2.5 ms"), std::string::npos);
  EXPECT_NE(html.find("<span class=\"host\">on 10.0.0.2:5432</span>"), std::string::npos);
  EXPECT_EQ(html.find("class=\"host\">on </span>"), std::string::npos) << "no host: no span";
  // In order.
  EXPECT_LT(html.find("id=\"s1\""), html.find("id=\"s2\""));
}

TEST(StudioPages, ListsReportsAndChartsEscapeAndLinkWithinTheStudio) {
  ReportTable conv;
  conv.columns = {"conversation", "agent_id", "user_name", "policy_group", "statements"};
  conv.rows.push_back({text(kScript), text(kAttr), text(kJsUrl), text("g"), number("3")});
  Filter f;
  const std::string list = conversationsPage(f, conv);
  expectInert(list);
  EXPECT_NE(
      list.find(
          "href=\"/studio/conversation?id=%3Cscript%3Ealert%281%29%3C%2Fscript%3E&amp;since=24h\""),
      std::string::npos)
      << list;
  EXPECT_NE(list.find("href=\"/studio/?since=24h&amp;user=javascript%3Aalert%283%29\""),
            std::string::npos);

  ReportTable retries;
  retries.columns = {"conversation", "agent_id", "fingerprint", "attempts", "variants", "example"};
  retries.rows.push_back(
      {text(kScript), text(kAttr), text("f1"), number("5"), number("4"), text(kScript)});
  const std::string page = reportPage(ReportKind::kRetries, f, retries, ReportTable{});
  expectInert(page);
  EXPECT_NE(page.find("<svg"), std::string::npos);

  ReportTable over_time;
  over_time.columns = {"bucket", "deny_code", "denials"};
  over_time.rows.push_back({text(kScript), text(kAttr), number("2")});
  const std::string denials = reportPage(ReportKind::kDenials, f, ReportTable{}, over_time);
  expectInert(denials);
  EXPECT_NE(denials.find("<rect"), std::string::npos);
}

}  // namespace
}  // namespace pgwarden::studio
