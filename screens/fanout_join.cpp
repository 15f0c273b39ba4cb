// FANOUT_JOIN: count(*) or sum() over a join whose key repeats on the side that multiplies the
// other: rows are counted (or amounts added) more than once. Needs the catalog to know the key is
// not unique (no unique index, and pg_stats' n_distinct says values repeat); silent otherwise.
#include "guards/codes.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

void fanoutJoin(const ScreenInput& in, Findings& out) {
  const analysis::ScreenFacts& f = in.statement->screen;
  if (!f.count_or_sum || !f.joined) return;
  for (size_t i = 0; i + 1 < f.join_keys.size(); i += 2) {
    const auto& a = f.join_keys[i];
    const auto& b = f.join_keys[i + 1];
    const ResolvedColumn ca = resolveColumn(in, a.table, a.column);
    const ResolvedColumn cb = resolveColumn(in, b.table, b.column);
    if (!ca.column || !cb.column) continue;
    // Rows of one side are repeated once per match on the other side: a repeating key on the
    // other side multiplies them. count(*) counts both sides' repeats; sum(t.col) those of t.
    auto summed = [&](int table) {
      for (int t : f.summed_tables) {
        if (t == table) return true;
      }
      return false;
    };
    const bool many_many = ca.column->knownRepeating() && cb.column->knownRepeating();
    const bool a_multiplied = summed(a.table) && cb.column->knownRepeating() && !cb.column->knownUnique();
    const bool b_multiplied = summed(b.table) && ca.column->knownRepeating() && !ca.column->knownUnique();
    if (!many_many && !a_multiplied && !b_multiplied) continue;
    const ResolvedColumn& repeating = b_multiplied && !a_multiplied ? ca : cb;
    const std::string& key = &repeating == &ca ? a.column : b.column;

    const std::string repeating_name = repeating.tableName();
    guards::GuardResult r;
    r.code = std::string(guards::codes::kFanoutJoin);
    r.subject = repeating_name;
    r.message =
        "The join on " + a.column + " = " + b.column + " repeats rows: " + key +
        " is not unique in " + repeating_name +
        ", so count(*), sum() and avg() count some rows more than once. Count distinct keys, or "
        "aggregate the many side before joining.";
    r.hint = "count(DISTINCT " + (&repeating == &ca ? b.column : a.column) +
             ") or JOIN (SELECT " + key + ", sum(...) FROM ... GROUP BY " + key + ")";
    r.facts.add("left", ca.tableName() + "." + a.column)
        .add("right", cb.tableName() + "." + b.column)
        .add("repeating", repeating_name + "." + key);
    out.push_back(std::move(r));
    return;
  }
}

}  // namespace pgwarden::screens::detail
