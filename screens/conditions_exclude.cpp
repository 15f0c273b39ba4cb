// CONDITIONS_EXCLUDE: nothing matched a read of one table whose WHERE is two or more conditions
// the statistics can each estimate (an MCV value, IS [NOT] NULL), and each alone matches rows:
// had they been independent, at least kMinExpectedTogether rows would have matched together. They
// exclude each other in the data (status = 'NEW' and a ship date: new orders have none). Says how
// many rows each matches alone and gives the count query that shows it. Estimates from pg_stats,
// and for one value the statistics do not know, the statement's probe (screens/probe.h).
#include <cmath>

#include "guards/codes.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {

using Op = analysis::ScreenComparison::Op;

// Independent conditions expected to match this many rows together leave an empty result by
// chance with a probability of e^-10 (Poisson): the emptiness says they exclude each other.
constexpr double kMinExpectedTogether = 10;

struct Estimate {
  std::string condition;  // as SQL, for the message and the hint
  double share = 0;       // of the table's rows
};

std::string literal(const analysis::ColumnStats& col, const std::string& v) {
  return col.category == 'N' ? v : quoteLiteral(v);
}

// The share of rows an `=` / IN comparison matches, from the MCVs; nothing when a value is not
// among them (its frequency is a guess).
std::optional<double> mcvShare(const ScreenInput& in, const analysis::ScreenComparison& c,
                               const analysis::ColumnStats& col, std::string& condition) {
  if (c.icase || (col.category != 'S' && col.category != 'E' && col.category != 'N'))
    return std::nullopt;
  if (col.mcv_freqs.size() != col.mcv.size()) return std::nullopt;
  double share = 0;
  std::string list;
  for (const auto& v : c.values) {
    const std::string* text = valueText(in, v);
    if (!text) return std::nullopt;
    bool found = false;
    for (size_t i = 0; i < col.mcv.size() && !found; ++i) {
      const bool same = col.category == 'N' ? analysis::compareValues('N', col.mcv[i], *text) == 0
                                            : col.mcv[i] == *text;
      if (same) {
        share += col.mcv_freqs[i];
        found = true;
      }
    }
    if (!found) return std::nullopt;
    list += (list.empty() ? "" : ", ") + literal(col, *text);
  }
  condition = c.values.size() == 1 ? c.column + " = " + list : c.column + " IN (" + list + ")";
  return share;
}

// The share of rows an `=` / IN comparison matches by the statement's probe: the index's count
// (at most kProbeRowLimit, so never more than the share it has).
std::optional<double> probedShare(const ScreenInput& in, int index,
                                  const analysis::ScreenComparison& c,
                                  const analysis::ColumnStats& col, int64_t table_rows,
                                  std::string& condition) {
  if (!in.probe || !in.probe->answers(index) || in.probe->rows <= 0 || table_rows <= 0)
    return std::nullopt;
  std::string list;
  for (const auto& v : c.values) {
    const std::string* text = valueText(in, v);
    if (!text) return std::nullopt;
    list += (list.empty() ? "" : ", ") + literal(col, *text);
  }
  condition = c.values.size() == 1 ? c.column + " = " + list : c.column + " IN (" + list + ")";
  return static_cast<double>(in.probe->rows) / static_cast<double>(table_rows);
}

std::optional<Estimate> estimate(const ScreenInput& in, int index,
                                 const analysis::ScreenComparison& c) {
  const ResolvedColumn rc = resolveColumn(in, c.table, c.column);
  if (!rc.column || !rc.column->analyzed) return std::nullopt;
  const analysis::ColumnStats& col = *rc.column;
  Estimate e;
  switch (c.op) {
    case Op::kIsNull:
      e.condition = c.column + " IS NULL";
      e.share = col.null_frac;
      return e;
    case Op::kNotNull:
      e.condition = c.column + " IS NOT NULL";
      e.share = 1 - col.null_frac;
      return e;
    case Op::kEq: {
      auto share = mcvShare(in, c, col, e.condition);
      if (!share) share = probedShare(in, index, c, col, rc.table->estimated_rows, e.condition);
      if (!share) return std::nullopt;
      e.share = *share;
      return e;
    }
    case Op::kLower:
    case Op::kUpper:
    case Op::kLike:
      return std::nullopt;  // the bounds say where data is, not how much of it a range holds
  }
  return std::nullopt;
}

}  // namespace

void conditionsExclude(const ScreenInput& in, Findings& out) {
  const analysis::ScreenFacts& f = in.statement->screen;
  if (!nothingMatched(in.result, *in.statement) || f.tables.size() != 1 || f.joined ||
      f.grouped_filter)
    return;
  if (f.where_conditions < 2 || f.comparisons.size() != static_cast<size_t>(f.where_conditions))
    return;
  for (const auto& found : out) {
    // An unknown value or a range outside the data already says why nothing matched.
    if (found.code == guards::codes::kUnknownValue || found.code == guards::codes::kOutOfRange)
      return;
  }
  std::vector<Estimate> parts;
  for (size_t i = 0; i < f.comparisons.size(); ++i) {
    auto e = estimate(in, static_cast<int>(i), f.comparisons[i]);
    if (!e) return;
    parts.push_back(std::move(*e));
  }
  const bool probed = in.probe && in.probe->state == ProbeAnswer::State::kAnswered;
  const ResolvedColumn rc =
      resolveColumn(in, f.comparisons.front().table, f.comparisons.front().column);
  if (!rc.table || rc.table->estimated_rows <= 0) return;
  const auto rows = static_cast<double>(rc.table->estimated_rows);
  double together = rows;
  for (const auto& p : parts) {
    if (p.share * rows < kMinExpectedTogether) return;  // one alone matches few: nothing odd
    together *= p.share;
  }
  if (together < kMinExpectedTogether) return;

  std::vector<std::string> conditions, alone;
  std::string each, counts;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto n = static_cast<int64_t>(std::llround(parts[i].share * rows));
    conditions.push_back(parts[i].condition);
    alone.push_back(std::to_string(n));
    each += (i ? ", " : "") + parts[i].condition + ": about " + std::to_string(n);
    counts += (i ? ", " : "") + std::string("count(*) FILTER (WHERE ") + parts[i].condition +
              ") AS alone_" + std::to_string(i + 1);
  }
  const analysis::ScreenTable& t = f.tables.front();
  const std::string written = t.schema.empty() ? t.name : t.schema + "." + t.name;
  guards::GuardResult r;
  r.code = std::string(guards::codes::kConditionsExclude);
  r.subject = rc.tableName();
  r.message = "Nothing matched, yet each condition alone matches rows of " + r.subject + " (" +
              each + " of " + std::to_string(rc.table->estimated_rows) +
              (probed ? ", by the statistics and an index count" : ", by the statistics") +
              "): together they exclude each other in the data. Check which "
              "combination the question means; the hint counts each condition alone.";
  r.hint = "SELECT " + counts + " FROM " + written;
  r.facts.add("table", r.subject)
      .add("conditions", conditions)
      .add("rows_alone", alone)
      .add("expected_together", static_cast<int64_t>(std::llround(together)))
      .add("estimated_rows", rc.table->estimated_rows)
      .add("source", probed ? "pg_stats, index_probe" : "pg_stats");
  out.push_back(std::move(r));
}

}  // namespace pgwarden::screens::detail
