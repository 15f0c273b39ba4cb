// ARBITRARY_ROWS: LIMIT n without ORDER BY returned exactly n rows, so which n is up to the plan
// and will change between runs.
#include "guards/codes.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

void arbitraryRows(const ScreenInput& in, Findings& out) {
  const analysis::StatementInfo& st = *in.statement;
  if (!st.screen.limit_without_order || st.limit_value <= 0 || in.result.rows != st.limit_value) return;
  // A lone aggregate row under LIMIT 1 is the only row there is.
  if (st.has_aggregate && st.limit_value == 1) return;
  guards::GuardResult r;
  r.code = std::string(guards::codes::kArbitraryRows);
  const std::string n = std::to_string(st.limit_value);
  r.message = "LIMIT " + n + " without ORDER BY returned " + n +
              " rows the server happened to read first: an arbitrary subset that will change "
              "between runs. Add ORDER BY to say which rows you want (the latest, the largest), or "
              "aggregate if you want a total.";
  r.hint = "ORDER BY <column> DESC LIMIT " + n;
  r.facts.add("limit", st.limit_value).add("rows", in.result.rows);
  out.push_back(std::move(r));
}

}  // namespace pgwarden::screens::detail
