// history: each report on a seeded SQLite store gives the expected rows; text and JSON output;
// the `pgwarden report` command line.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "history/recorder.h"
#include "history/report.h"
#include "report_expect.h"
#include "test_util.h"

namespace pgwarden::history {
namespace {

using test::TempDir;

class SqliteReports : public ::testing::Test {
 protected:
  void SetUp() override {
    HistoryConfig c;
    c.store = "sqlite";
    c.path = dir_.file("history.db");
    c.flush_interval = std::chrono::milliseconds(10);
    auto rec = makeRecorder(c);
    for (auto& r : test::reportSeed(now_us_)) ASSERT_TRUE(rec->submit(std::move(r)));
    rec->shutdown(std::chrono::seconds(5));
    ASSERT_EQ(rec->stats().written, test::reportSeed(now_us_).size());
    path_ = c.path;
  }

  ReportTable run(ReportKind kind, std::chrono::milliseconds since = {}, int64_t min_variants = 3) {
    ReportOptions o;
    o.kind = kind;
    o.since = since;
    o.min_variants = min_variants;
    return run(o);
  }

  ReportTable run(ReportOptions o) {
    o.store = "sqlite";
    o.target = path_;
    o.now_us = now_us_;
    auto t = runReport(o);
    EXPECT_TRUE(t.ok()) << t.error();
    return t.ok() ? *t : ReportTable{};
  }

  // `pgwarden report` as the command line hands it over.
  int command(const ReportRequest& request, std::string* out, std::string* err) {
    std::ostringstream o;
    std::ostringstream e;
    const int rc = runReportCommand(request, o, e);
    *out = o.str();
    *err = e.str();
    return rc;
  }

  static ReportRequest request(ReportKind kind, std::string store, std::string config = "") {
    ReportRequest r;
    r.options.kind = kind;
    r.store = std::move(store);
    r.config_file = std::move(config);
    return r;
  }

  TempDir dir_;
  std::string path_;
  const int64_t now_us_ = test::nowUs();
};

// Each report over a time range reads the history table through an index (the started_at range,
// or a record by its id), never by scanning it whole: on a store pgwarden made (no statistics)
// and on one whose statistics say what a 10M-record store's ANALYZE says (a store of that size
// grouped `repeats` by reading every record in the fingerprint index's order).
TEST_F(SqliteReports, EachReportReadsOnlyItsTimeRange) {
  for (const bool with_stats : {false, true}) {
    if (with_stats) {
      test::sqliteQuery(path_, "ANALYZE");
      test::sqliteQuery(path_, "DELETE FROM sqlite_stat1");
      for (const char* stat : {"'pgwarden_history_fingerprint_idx', '10000000 5000'",
                               "'pgwarden_history_conversation_id_idx', '10000000 10'",
                               "'pgwarden_history_started_at_idx', '10000000 1'"}) {
        test::sqliteQuery(path_, std::string("INSERT INTO sqlite_stat1 VALUES "
                                             "('pgwarden_history', ") +
                                     stat + ")");
      }
    }
    for (ReportKind kind :
         {ReportKind::kRetries, ReportKind::kRepeats, ReportKind::kDenials, ReportKind::kZeros}) {
      const auto plan =
          test::sqliteQuery(path_, "EXPLAIN QUERY PLAN " + reportSql(kind, Dialect::kSqlite, true));
      for (const auto& row : plan) {
        const std::string& step = row.back();
        EXPECT_EQ(step.find("SCAN pgwarden_history"), std::string::npos)
            << reportKindName(kind) << (with_stats ? ", with statistics: " : ": ") << step;
      }
    }
  }
}

TEST_F(SqliteReports, Retries) { test::expectRetries(run(ReportKind::kRetries), now_us_); }

TEST_F(SqliteReports, RetriesMinVariants) {
  // With 2, nothing more qualifies (c2's shape has one text); with 1, every (conversation,
  // fingerprint) pair does.
  EXPECT_EQ(run(ReportKind::kRetries, {}, 2).rows.size(), 3u);
  EXPECT_EQ(run(ReportKind::kRetries, {}, 1).rows.size(), 8u);
  EXPECT_EQ(run(ReportKind::kRetries, {}, 6).rows.size(), 0u);
}

TEST_F(SqliteReports, Repeats) { test::expectRepeats(run(ReportKind::kRepeats), false); }

TEST_F(SqliteReports, RepeatsSince) {
  test::expectRepeats(run(ReportKind::kRepeats, std::chrono::hours(24 * 7)), true);
}

TEST_F(SqliteReports, Denials) { test::expectDenials(run(ReportKind::kDenials)); }

TEST_F(SqliteReports, Zeros) { test::expectZeros(run(ReportKind::kZeros)); }

TEST_F(SqliteReports, TextTableIsAligned) {
  const std::string text = formatReportText(run(ReportKind::kRetries));
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 6u) << text;  // header, rule, 3 rows, count
  EXPECT_EQ(lines[0].rfind("conversation", 0), 0u);
  EXPECT_EQ(lines[5], "(3 rows)");
  // Every column starts where its rule segment starts.
  const std::string& rule = lines[1];
  std::vector<size_t> starts = {0};
  for (size_t i = 1; i < rule.size(); ++i) {
    if (rule[i] == '-' && rule[i - 1] == ' ') starts.push_back(i);
  }
  EXPECT_EQ(starts.size(), 10u);
  // Numeric columns are right-aligned: "attempts" (4th) ends where its rule ends.
  const size_t attempts_end = rule.find(' ', starts[3]);
  EXPECT_EQ(lines[0].substr(starts[3], attempts_end - starts[3]), "attempts");
  EXPECT_EQ(lines[2][attempts_end - 1], '6') << lines[2];
  EXPECT_EQ(lines[2].substr(0, 2), "c1");
}

TEST_F(SqliteReports, CommandPrintsJson) {
  std::string out;
  std::string err;
  ReportRequest r = request(ReportKind::kDenials, "sqlite:" + path_);
  r.format = ReportFormat::kJson;
  ASSERT_EQ(command(r, &out, &err), 0) << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["report"], "denials");
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["deny_code"], "require_predicate");
  EXPECT_EQ(j["rows"][0]["denials"], 4);
  EXPECT_EQ(j["rows"][0]["latest_reason"], "users needs a WHERE on id or email (latest)");
}

TEST_F(SqliteReports, CommandLimitSinceAndConfig) {
  const std::string cfg = dir_.file("pgwarden.yaml");
  std::ofstream(cfg) << "listen:\n  addresses: [\"127.0.0.1:6432\"]\nhistory:\n  store: sqlite\n"
                        "  path: " << path_ << "\n";
  std::string out;
  std::string err;
  ReportRequest r = request(ReportKind::kRepeats, "", cfg);
  r.options.limit = 1;
  r.options.since = std::chrono::hours(24 * 7);
  r.format = ReportFormat::kJson;
  ASSERT_EQ(command(r, &out, &err), 0) << err;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["rows"][0]["conversations"], 2);
  ASSERT_EQ(command(request(ReportKind::kZeros, "sqlite:" + path_), &out, &err), 0) << err;
  EXPECT_NE(out.find("(3 rows)"), std::string::npos) << out;
}

TEST_F(SqliteReports, CommandReadsTheHistoryPathFromTheEnvironment) {
  const std::string cfg = dir_.file("env.yaml");
  std::ofstream(cfg) << "history:\n  store: sqlite\n  path: ${PGW_TEST_REPORT_DB}\n";
  std::string out;
  std::string err;
  ::unsetenv("PGW_TEST_REPORT_DB");
  EXPECT_EQ(command(request(ReportKind::kZeros, "", cfg), &out, &err), 1);
  EXPECT_NE(err.find(":3: history.path: environment variable PGW_TEST_REPORT_DB is not set"),
            std::string::npos)
      << err;
  ::setenv("PGW_TEST_REPORT_DB", path_.c_str(), 1);
  EXPECT_EQ(command(request(ReportKind::kZeros, "", cfg), &out, &err), 0) << err;
  EXPECT_NE(out.find("(3 rows)"), std::string::npos) << out;
  ::unsetenv("PGW_TEST_REPORT_DB");
}

TEST_F(SqliteReports, CommandErrors) {
  std::string out;
  std::string err;
  EXPECT_EQ(command(request(ReportKind::kRetries, "mysql:x"), &out, &err), 2);
  EXPECT_EQ(command(request(ReportKind::kRetries, "sqlite:" + dir_.file("missing.db")), &out, &err),
            1);
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;
  const std::string bad_cfg = dir_.file("bad.yaml");
  std::ofstream(bad_cfg) << "history:\n  store: sqlite\n  pathh: x\n";
  EXPECT_EQ(command(request(ReportKind::kRetries, "", bad_cfg), &out, &err), 1);
  EXPECT_NE(err.find(":3: history.pathh:"), std::string::npos) << err;
}

TEST_F(SqliteReports, ConversationIsItsTimelineInOrder) {
  ReportOptions o;
  o.kind = ReportKind::kConversation;
  o.conversation = "c1";
  const ReportTable t = run(o);
  ASSERT_EQ(t.rows.size(), 6u);
  const int n = t.column("n");
  const int sql = t.column("sql_text");
  const int codes = t.column("warning_codes");
  ASSERT_GE(n, 0);
  ASSERT_GE(sql, 0);
  ASSERT_GE(codes, 0);
  const char* texts[] = {"'late'", "'Late'", "'LATE'", "'overdue'", "'late'", "'DELAYED'"};
  for (size_t i = 0; i < t.rows.size(); ++i) {
    EXPECT_EQ(t.rows[i][n].text, std::to_string(i + 1));
    EXPECT_NE(t.rows[i][sql].text.find(texts[i]), std::string::npos) << t.rows[i][sql].text;
  }
  EXPECT_EQ(t.rows[0][codes].text, "UNKNOWN_VALUE");
  EXPECT_EQ(t.rows[1][codes].text, "");
  // A session without a conversation id, by the key the other reports show.
  o.conversation = "session:i1:77";
  const ReportTable s = run(o);
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.rows[0][s.column("outcome")].text, "error");
  EXPECT_NE(s.rows[2][sql].text.find("'Europe'"), std::string::npos);
  o.conversation = "nobody";
  EXPECT_EQ(run(o).rows.size(), 0u);
}

// A file an older pgwarden wrote (before request_id, traceparent and host), read before this
// pgwarden's daemon has opened it: the reports run, the newer columns read as their defaults, and
// the file is left as it was.
TEST_F(SqliteReports, AnOlderStoreIsReadAsItIs) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  for (const char* col : {"host", "traceparent", "request_id"}) {
    const std::string sql = std::string("ALTER TABLE pgwarden_history DROP COLUMN ") + col;
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
  }
  sqlite3_close(db);
  ReportOptions o;
  o.kind = ReportKind::kConversation;
  o.conversation = "c1";
  const ReportTable t = run(o);
  ASSERT_EQ(t.rows.size(), 6u);
  EXPECT_EQ(t.rows[0][t.column("host")].text, "");
  test::expectZeros(run(ReportKind::kZeros));
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_table_info('pgwarden_history') "
                                   "WHERE name = 'host'",
                               -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 0) << "a report never changes the store";
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(SqliteReports, CommandFormatsAndProgress) {
  std::string out;
  std::string err;
  ReportRequest r = request(ReportKind::kConversation, "sqlite:" + path_);
  r.options.conversation = "c1";
  r.format = ReportFormat::kCsv;
  ASSERT_EQ(command(r, &out, &err), 0) << err;
  EXPECT_EQ(out.rfind("n,started_at,agent_id,outcome,deny_code,warning_codes,", 0), 0u) << out;
  EXPECT_NE(out.find("\r\n6,"), std::string::npos) << out;
  EXPECT_EQ(err, "");  // quicker than a second: no progress
  r.format = ReportFormat::kHtml;
  r.progress_after = std::chrono::milliseconds(0);
  ASSERT_EQ(command(r, &out, &err), 0) << err;
  EXPECT_EQ(out.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(out.find("status = &#39;DELAYED&#39;"), std::string::npos) << out;
  EXPECT_NE(err.find("pgwarden report conversation: reading the sqlite store, 0."),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("pgwarden report conversation: done in "), std::string::npos) << err;
}

TEST(Reports, CsvQuotesAndHtmlEscapes) {
  ReportTable t;
  t.columns = {"sql_text", "rows"};
  t.rows.push_back(
      {ReportCell{"SELECT 'a,b', \"x\"\n", false, false}, ReportCell{"3", true, false}});
  t.rows.push_back({ReportCell{"=HYPERLINK(1)", false, false}, ReportCell{"-1", true, false}});
  t.rows.push_back(
      {ReportCell{"<script>alert(1)</script>", false, false}, ReportCell{"", false, true}});
  EXPECT_EQ(formatReportCsv(t),
            "sql_text,rows\r\n\"SELECT 'a,b', \"\"x\"\"\n\",3\r\n\"'=HYPERLINK(1)\",-1\r\n"
            "<script>alert(1)</script>,\r\n");
  const std::string html = formatReportHtml("x<y", t);
  EXPECT_EQ(html.find("<script>"), std::string::npos) << html;
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("<title>x&lt;y</title>"), std::string::npos);
  EXPECT_EQ(htmlEscape(R"(&<>"')"), "&amp;&lt;&gt;&quot;&#39;");
  ReportFormat f{};
  EXPECT_TRUE(parseReportFormat("csv", &f));
  EXPECT_EQ(f, ReportFormat::kCsv);
  EXPECT_FALSE(parseReportFormat("xml", &f));
}

TEST(Reports, EmptyTableStillPrintsHeader) {
  ReportTable t;
  t.columns = {"deny_code", "denials"};
  EXPECT_EQ(formatReportText(t), "deny_code  denials\n---------  -------\n(0 rows)\n");
  EXPECT_EQ(formatReportJson("denials", t), "{\"report\":\"denials\",\"rows\":[]}\n");
}

TEST(Reports, LongAndMultiLineCellsAreCutForDisplayOnly) {
  ReportTable t;
  t.columns = {"example"};
  t.rows.push_back({ReportCell{"SELECT\n" + std::string(100, 'x'), false, false}});
  const std::string text = formatReportText(t);
  EXPECT_NE(text.find("SELECT xxx"), std::string::npos);
  EXPECT_NE(text.find("...\n"), std::string::npos);
  const auto j = nlohmann::json::parse(formatReportJson("retries", t));
  EXPECT_EQ(j["rows"][0]["example"], "SELECT\n" + std::string(100, 'x'));
}

}  // namespace
}  // namespace pgwarden::history
