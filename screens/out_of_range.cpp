// OUT_OF_RANGE: nothing matched, and a range predicate lies wholly outside the column's data as
// the statistics saw it (histogram bounds and MCVs, else min/max read through a btree index; dates
// compared by day, numbers by value).
#include "guards/codes.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

void outOfRange(const ScreenInput& in, Findings& out) {
  if (!nothingMatched(in.result, *in.statement)) return;
  using Op = analysis::ScreenComparison::Op;
  for (const auto& c : in.statement->screen.comparisons) {
    if ((c.op != Op::kLower && c.op != Op::kUpper) || c.values.size() != 1) continue;
    // A relative time is folded to its day with a day of slack towards the data.
    std::string folded;
    const analysis::ScreenValue& value = c.values.front();
    if (value.relative) folded = foldedDay(value, c.op == Op::kLower ? -1 : 1);
    const std::string* v = value.relative ? &folded : valueText(in, value);
    if (!v) continue;
    const ResolvedColumn rc = resolveColumn(in, c.table, c.column);
    std::string low, high;
    const char* source = "";
    if (!rc.column || !rc.column->bounds(&low, &high, &source)) continue;
    const char cat = rc.column->category;
    if (value.relative && cat != 'D') continue;
    // Strictly outside: a bound the sample saw is not the column's true edge.
    const bool starts_after =
        c.op == Op::kLower && analysis::compareValues(cat, *v, high).value_or(0) > 0;
    const bool ends_before =
        c.op == Op::kUpper && analysis::compareValues(cat, *v, low).value_or(0) < 0;
    if (!starts_after && !ends_before) continue;

    guards::GuardResult r;
    r.code = std::string(guards::codes::kOutOfRange);
    r.subject = rc.tableName();
    r.message = c.column + " data runs from " + low + " to " + high + "; your range " +
                (starts_after ? "starts " : "ends ") + *v +
                ". Nothing can match: move the range inside the data, or check the year.";
    r.hint = c.column + (starts_after ? " >= '" + low + "'" : " <= '" + high + "'");
    if (cat == 'N') r.hint = c.column + (starts_after ? " >= " + low : " <= " + high);
    r.facts.add("table", r.subject)
        .add("column", c.column)
        .add("low", low)
        .add("high", high)
        .add(starts_after ? "range_starts" : "range_ends", *v)
        .add("bounds_from", source);
    if (value.relative) r.facts.add("relative", true);
    out.push_back(std::move(r));
  }
}

}  // namespace pgwarden::screens::detail
