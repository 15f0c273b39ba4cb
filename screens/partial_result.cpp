// PARTIAL_RESULT: the row cap cut the result, so any total, count or set of distinct values the
// client computes from these rows is partial. Suggests the aggregate that answers it on the server.
#include "guards/codes.h"
#include "guards/guard_util.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {
constexpr size_t kMaxQuotedSql = 400;
}

void partialResult(const ScreenInput& in, Findings& out) {
  if (!in.result.truncated) return;
  guards::GuardResult r;
  r.code = std::string(guards::codes::kPartialResult);
  const std::string n = std::to_string(in.result.rows);
  r.message = "Only the first " + n +
              " rows came back: totals, counts, averages or distinct values computed from them are "
              "partial, not the answer. Compute them on the server with an aggregate (count(*), "
              "sum(...), count(DISTINCT ...)) and GROUP BY.";
  const std::string_view sql = in.sql;
  if (!sql.empty() && sql.size() <= kMaxQuotedSql) {
    std::string inner(sql);
    while (!inner.empty() && (inner.back() == ';' || inner.back() == ' ' || inner.back() == '\n')) inner.pop_back();
    r.hint = "SELECT count(*) FROM (" + inner + ") AS q";
  } else {
    r.hint = "SELECT count(*), count(DISTINCT <column>) FROM <table> WHERE ...";
  }
  r.facts.add("rows", in.result.rows).add("row_cap", in.result.row_cap);
  out.push_back(std::move(r));
}

}  // namespace pgwarden::screens::detail
