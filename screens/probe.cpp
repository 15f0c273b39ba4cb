// The screens' probe: which comparison of an empty read an indexed count would decide, the
// query that asks it, and its answer read back (screens/probe.h).
#include "screens/probe.h"

#include <charconv>

#include "screens/screen_util.h"

namespace pgwarden::screens {

namespace {

std::string escapedLiteral(std::string_view v) {
  std::string out = "E'";
  for (char c : v) {
    if (c == '\\' || c == '\'') out += c;
    out += c;
  }
  return out + "'";
}

// The values of `c` as text when a probe could decide them: none is among the MCVs (a value
// there occurs), and each is known (a constant, or a Bind's text value).
std::optional<std::vector<std::string>> undecidedValues(const ScreenInput& in,
                                                        const analysis::ScreenComparison& c,
                                                        const analysis::ColumnStats& col) {
  std::vector<std::string> out;
  for (const auto& v : c.values) {
    const std::string* text = detail::valueText(in, v);
    if (!text || text->find('\0') != std::string::npos) return std::nullopt;
    for (const auto& m : col.mcv) {
      const bool same =
          col.category == 'N' ? analysis::compareValues('N', m, *text) == 0 : m == *text;
      if (same) return std::nullopt;
    }
    out.push_back(*text);
  }
  return out;
}

}  // namespace

std::optional<ProbeRequest> probeRequest(const ScreenInput& in, int timeout_ms) {
  if (timeout_ms <= 0 || !in.statement || !in.stats || !nothingMatched(in.result, *in.statement))
    return std::nullopt;
  const auto& comparisons = in.statement->screen.comparisons;
  if (comparisons.empty()) return std::nullopt;
  {
    // The statistics already say why nothing matched: no question is left to ask.
    detail::Findings found;
    detail::unknownValue(in, found);
    detail::outOfRange(in, found);
    if (!found.empty()) return std::nullopt;
  }
  for (size_t i = 0; i < comparisons.size(); ++i) {
    const analysis::ScreenComparison& c = comparisons[i];
    if (c.op != analysis::ScreenComparison::Op::kEq || c.icase || c.values.empty() ||
        c.values.size() > kMaxProbeValues)
      continue;
    const detail::ResolvedColumn rc = detail::resolveColumn(in, c.table, c.column);
    if (!rc.column || !rc.column->leads_btree) continue;
    const analysis::ColumnStats& col = *rc.column;
    if (col.category != 'S' && col.category != 'N') continue;
    // A column whose every value is known is decided without asking (UNKNOWN_VALUE).
    if (col.knownValues() || !col.all_values.empty()) continue;
    auto values = undecidedValues(in, c, col);
    if (!values) continue;
    return ProbeRequest{static_cast<int>(i),
                        probeQuery(rc.schema, rc.name, c.column, *values, timeout_ms)};
  }
  return std::nullopt;
}

std::string probeQuery(std::string_view schema, std::string_view table, std::string_view column,
                       const std::vector<std::string>& values, int timeout_ms) {
  std::string list;
  for (const auto& v : values) list += (list.empty() ? "" : ", ") + escapedLiteral(v);
  return "SET LOCAL statement_timeout = " + std::to_string(timeout_ms) +
         "; SET LOCAL enable_seqscan = off; SELECT count(*) FROM (SELECT 1 FROM " +
         analysis::quotedIdentifier(schema) + "." + analysis::quotedIdentifier(table) + " WHERE " +
         analysis::quotedIdentifier(column) + " IN (" + list + ") LIMIT " +
         std::to_string(kProbeRowLimit) + ") p";
}

int64_t readProbeCount(std::optional<std::string_view> cell) {
  if (!cell || cell->empty()) return -1;
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(cell->data(), cell->data() + cell->size(), n);
  if (ec != std::errc() || end != cell->data() + cell->size() || n < 0 || n > kProbeRowLimit)
    return -1;
  return n;
}

}  // namespace pgwarden::screens
