// What the screens' tests share: a statement screened against a made-up catalog snapshot and a
// result summary.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "screens/screen.h"

namespace pgwarden::screens::screentest {

using analysis::TableStatsSnapshot;
using Row = std::vector<std::string>;

inline Row column(std::string table, std::string col, std::string category, std::string mcv,
                  std::string freqs, std::string n_distinct, std::string histogram = "",
                  std::string unique = "false") {
  return {"public", table,      col,       category == "D" ? "date" : "text",
          category, "",         "",        mcv,
          freqs,    n_distinct, histogram, "true",
          unique};
}

inline std::shared_ptr<const TableStatsSnapshot> shipmentStats() {
  return TableStatsSnapshot::fromRows(
      {{"public", "fct_shipments", "50000", "ship_date,id", "date,bigint"},
       {"public", "orders", "20000", "id", "bigint"},
       {"public", "dim_region", "12", "region", "text"}},
      {column("fct_shipments", "status", "S", "{DELIVERED,DELAYED,RETURNED}", "{0.6,0.25,0.15}",
              "3"),
       column("fct_shipments", "ship_date", "D", "", "", "-0.02", "{2023-01-01,2026-06-30}"),
       column("fct_shipments", "tracking_no", "S", "{A1,B2}", "{0.0001,0.0001}", "-1"),
       column("fct_shipments", "order_id", "N", "", "", "-0.4"),
       column("fct_shipments", "id", "N", "", "", "-1", "", "true"),
       column("orders", "id", "N", "", "", "-1", "", "true"),
       column("orders", "customer_id", "N", "", "", "-0.1")});
}

struct Screening {
  std::shared_ptr<const analysis::Analysis> analysis;
  std::vector<std::optional<std::string>> params;
  ResultSummary result;
  std::shared_ptr<const TableStatsSnapshot> stats = shipmentStats();
  const guards::PolicyGroup* group = nullptr;

  std::vector<guards::Verdict> screen(std::string_view sql) {
    analysis = analysis::analyzeUncached(sql);
    EXPECT_TRUE(analysis->ok) << sql;
    ScreenInput in;
    in.statement = &analysis->statements.at(0);
    in.sql = sql;
    in.result = result;
    in.stats = stats.get();
    in.group = group;
    in.params = &params;
    return screenResult(in);
  }
};

inline ResultSummary empty() { return {}; }
inline ResultSummary singleZero() { return {1, true, false, -1}; }
inline ResultSummary rows(int64_t n) { return {n, false, false, -1}; }

inline std::vector<std::string> codesOf(const std::vector<guards::Verdict>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) out.push_back(v.code);
  return out;
}

}  // namespace pgwarden::screens::screentest
