// The rows each report must give on test::reportSeed, whichever store holds it. Shared by the
// SQLite and the PostgreSQL report tests so both stores are held to the same answers.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "history/report.h"
#include "history/text.h"

namespace pgwarden::history::test {

using Table = std::vector<std::vector<std::string>>;

inline Table cellsOf(const ReportTable& t) {
  Table out;
  for (const auto& row : t.rows) {
    std::vector<std::string> r;
    for (const auto& c : row) r.push_back(c.null ? "<null>" : c.text);
    out.push_back(std::move(r));
  }
  return out;
}

inline std::string minutesAgo(int64_t now_us, int minutes) {
  return formatTimestampUs(now_us - int64_t{minutes} * 60'000'000);
}

inline void expectRetries(const ReportTable& t, int64_t now_us) {
  EXPECT_EQ(t.columns, (std::vector<std::string>{"conversation", "agent_id", "fingerprint",
                                                  "attempts", "variants", "denials", "errors",
                                                  "zeros", "last_seen", "example"}));
  const Table expected = {
      {"c1", "agent-c1", "f1", "6", "5", "0", "0", "5", minutesAgo(now_us, 55),
       "SELECT count(*) FROM orders WHERE status = 'DELAYED'"},
      {"session:i1:77", "", "f5", "3", "3", "0", "1", "1", minutesAgo(now_us, 18),
       "SELECT 1 FROM shipments WHERE region = 'Europe'"},
      {"c3", "agent-c3", "f3", "3", "3", "3", "0", "0", minutesAgo(now_us, 38),
       "SELECT *  FROM users"},
  };
  EXPECT_EQ(cellsOf(t), expected);
  for (const auto& row : t.rows) EXPECT_TRUE(row[3].numeric);
}

inline void expectRepeats(const ReportTable& t, bool since_7d) {
  EXPECT_EQ(t.columns, (std::vector<std::string>{"fingerprint", "conversations", "sessions",
                                                  "runs", "texts", "denials", "last_seen",
                                                  "tables", "example"}));
  const Table cells = cellsOf(t);
  ASSERT_EQ(cells.size(), 2u);
  // last_seen is checked by the other reports; here the counts are the point.
  auto strip = [](std::vector<std::string> r) {
    r.erase(r.begin() + 6);
    return r;
  };
  const std::vector<std::string> f1 =
      since_7d ? std::vector<std::string>{"f1", "2", "2", "7", "5", "0", "[\"public.orders\"]",
                                          "SELECT count(*) FROM orders WHERE status = 'DELAYED'"}
               : std::vector<std::string>{"f1", "3", "3", "8", "6", "0", "[\"public.orders\"]",
                                          "SELECT count(*) FROM orders WHERE status = 'DELAYED'"};
  EXPECT_EQ(strip(cells[0]), f1);
  EXPECT_EQ(strip(cells[1]), (std::vector<std::string>{"f3", "2", "2", "4", "3", "4",
                                                        "[\"public.users\"]",
                                                        "SELECT * FROM users"}));
}

inline void expectDenials(const ReportTable& t) {
  EXPECT_EQ(t.columns, (std::vector<std::string>{"deny_code", "table_name", "policy_group",
                                                  "denials", "conversations", "last_seen",
                                                  "latest_reason"}));
  Table cells = cellsOf(t);
  for (auto& r : cells) r.erase(r.begin() + 5);
  const Table expected = {
      {"require_predicate", "public.users", "agents", "4", "2",
       "users needs a WHERE on id or email (latest)"},
      {"budget_exhausted", "public.customers", "agents", "1", "1",
       "the conversation's row budget is spent"},
      {"budget_exhausted", "public.orders", "agents", "1", "1",
       "the conversation's row budget is spent"},
  };
  EXPECT_EQ(cells, expected);
}

inline void expectZeros(const ReportTable& t) {
  EXPECT_EQ(t.columns, (std::vector<std::string>{"conversation", "agent_id", "fingerprint",
                                                  "results", "empty_results", "zero_counts",
                                                  "texts", "last_seen", "example"}));
  Table cells = cellsOf(t);
  for (auto& r : cells) r.erase(r.begin() + 7);
  const Table expected = {
      {"c1", "agent-c1", "f1", "5", "0", "5", "4",
       "SELECT count(*) FROM orders WHERE status = 'late'"},
      {"session:i1:77", "", "f5", "1", "1", "0", "1",
       "SELECT 1 FROM shipments WHERE region = 'eu'"},
      {"c2", "agent-c2", "f2", "1", "1", "0", "1", "SELECT id FROM orders WHERE customer = 'acme'"},
  };
  EXPECT_EQ(cells, expected);
}

}  // namespace pgwarden::history::test
