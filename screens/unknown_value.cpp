// UNKNOWN_VALUE: nothing matched, and the statement compares a column with a value the column
// never holds (enum labels, a CHECK IN-list, or MCVs that cover every row). Names the known
// values and a near match that differs only by case or surrounding whitespace; never guesses
// synonyms.
#include <algorithm>
#include <cctype>

#include "guards/codes.h"
#include "guards/guard_util.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool sameValue(const guards::ColumnStats& col, std::string_view known, std::string_view v, bool icase) {
  if (col.category == 'N') {
    auto c = guards::compareValues('N', known, v);
    return c && *c == 0;
  }
  return icase ? guards::util::iequals(known, v) : known == v;
}

const char* sourceOf(const guards::ColumnStats& col) {
  if (!col.enum_labels.empty()) return "enum";
  if (!col.check_values.empty()) return "check";
  return "pg_stats";
}

}  // namespace

void unknownValue(const ScreenInput& in, Findings& out) {
  if (!nothingMatched(in.result)) return;
  for (const auto& c : in.statement->screen.comparisons) {
    if (c.op != guards::ScreenComparison::Op::kEq || c.values.empty()) continue;
    const ResolvedColumn rc = resolveColumn(in, c.table, c.column);
    if (!rc.column) continue;
    const guards::ColumnStats& col = *rc.column;
    // Strings, enums and numbers compare as written; dates and booleans have many spellings.
    if (col.category != 'S' && col.category != 'E' && col.category != 'N') continue;
    const std::vector<std::string>* known = col.knownValues();
    if (!known) continue;
    // Every compared value must be unknown: with one known value the emptiness has another cause.
    std::vector<std::string> unknown;
    std::string near;
    bool all_unknown = true;
    for (const auto& v : c.values) {
      const std::string* text = valueText(in, v);
      if (!text) {
        all_unknown = false;
        break;
      }
      bool found = false;
      for (const auto& k : *known) {
        if (sameValue(col, k, *text, c.icase)) {
          found = true;
          break;
        }
        if (near.empty() && col.category != 'N' &&
            guards::util::iequals(trimmed(k), trimmed(*text))) {
          near = k;
        }
      }
      if (found) {
        all_unknown = false;
        break;
      }
      unknown.push_back(*text);
    }
    if (!all_unknown || unknown.empty()) continue;

    guards::GuardResult r;
    r.code = std::string(guards::codes::kUnknownValue);
    r.subject = rc.tableName();
    // Enum labels keep their declared order; other lists read best sorted.
    std::vector<std::string> sorted = *known;
    if (col.enum_labels.empty()) std::sort(sorted.begin(), sorted.end());
    known = &sorted;
    const std::string values = listValues(*known, false);
    const std::string quoted = listValues(unknown, true, 5);
    r.message = c.column + " has no value " + quoted + "; its values are " + values;
    if (!near.empty()) r.message += " (did you mean '" + near + "'?)";
    r.message += ". The empty result says nothing about " + quoted + ": compare with one of its values.";
    const std::string& example = near.empty() ? known->front() : near;
    r.hint = c.column + " = " + (col.category == 'N' ? example : "'" + example + "'");
    r.facts.add("table", r.subject)
        .add("column", c.column)
        .add("values", unknown)
        .add("known_values", *known)
        .add("source", sourceOf(col));
    if (!near.empty()) r.facts.add("near_match", near);
    out.push_back(std::move(r));
  }
}

}  // namespace pgwarden::screens::detail
