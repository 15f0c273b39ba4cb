// UNKNOWN_VALUE: nothing matched, and the statement compares a column with a value the column
// never holds (enum labels, a CHECK IN-list, MCVs that cover every row, or a string column's
// histogram and MCVs when together they list every value), or with a LIKE/ILIKE pattern none of
// its values matches. Names the values when there are few enough, and a near match that differs
// by case, surrounding whitespace or one typed character; never guesses synonyms.
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

bool sameValue(const analysis::ColumnStats& col, std::string_view known, std::string_view v,
               bool icase) {
  if (col.category == 'N') {
    auto c = analysis::compareValues('N', known, v);
    return c && *c == 0;
  }
  return icase ? guards::util::iequals(known, v) : known == v;
}

const char* sourceOf(const analysis::ColumnStats& col) {
  if (!col.enum_labels.empty()) return "enum";
  if (!col.check_values.empty()) return "check";
  return col.knownValues() ? "pg_stats" : "pg_stats_histogram";
}

// The column's every value when the catalog knows them: knownValues(), else the list a string
// column's histogram and MCVs make (ColumnStats::all_values).
const std::vector<std::string>* valuesOf(const analysis::ColumnStats& col) {
  if (const auto* known = col.knownValues()) return known;
  return col.all_values.empty() ? nullptr : &col.all_values;
}

// A list longer than this is not written out: "none of its N values" and the near match only.
constexpr size_t kMaxNamedValues = 64;

// One typed character apart (a letter left out, added, changed or two swapped), for values of
// four characters or more: 'DELIVRED' for 'DELIVERED', 'sku-1O' for 'sku-10'.
bool oneEditApart(std::string_view a, std::string_view b) {
  if (a.size() < 4 || b.size() < 4 || a == b) return false;
  if (a.size() > b.size()) std::swap(a, b);
  if (b.size() - a.size() > 1) return false;
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  if (a.size() == b.size()) {
    if (a.substr(i + 1) == b.substr(i + 1)) return true;  // one changed
    return i + 1 < a.size() && a[i] == b[i + 1] && a[i + 1] == b[i] &&
           a.substr(i + 2) == b.substr(i + 2);  // two swapped
  }
  return a.substr(i) == b.substr(i + 1);  // one left out
}

bool nearValue(std::string_view known, std::string_view v) {
  return guards::util::iequals(trimmed(known), trimmed(v)) || oneEditApart(known, v);
}

// SQL LIKE: '%' any run, '_' one character, a backslash escapes the next; case-blind for ILIKE
// (ASCII letters).
bool likeMatch(std::string_view pat, std::string_view text, bool icase) {
  auto same = [icase](char a, char b) {
    return icase ? std::tolower(static_cast<unsigned char>(a)) ==
                       std::tolower(static_cast<unsigned char>(b))
                 : a == b;
  };
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pat.size() && pat[p] == '%') {
      star = p++;
      mark = t;
    } else if (p < pat.size() && pat[p] == '\\' && p + 1 < pat.size() &&
               same(pat[p + 1], text[t])) {
      p += 2;
      ++t;
    } else if (p < pat.size() && pat[p] != '\\' && (pat[p] == '_' || same(pat[p], text[t]))) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '%') ++p;
  return p == pat.size();
}

std::string valuesPhrase(const std::vector<std::string>& known) {
  if (known.size() <= kMaxNamedValues) return "its values are " + listValues(known, false);
  return "its " + std::to_string(known.size()) + " values do not include it";
}

// col LIKE / ILIKE 'pattern' where no value of the column matches.
void unmatchedPattern(const ScreenInput& in, const analysis::ScreenComparison& c, Findings& out) {
  const ResolvedColumn rc = resolveColumn(in, c.table, c.column);
  if (!rc.column || rc.column->category != 'S' || c.values.size() != 1) return;
  const std::vector<std::string>* known = valuesOf(*rc.column);
  const std::string* pattern = valueText(in, c.values.front());
  if (!known || !pattern) return;
  for (const auto& k : *known) {
    if (likeMatch(*pattern, k, c.icase)) return;
  }
  std::vector<std::string> sorted = *known;
  if (rc.column->enum_labels.empty()) std::sort(sorted.begin(), sorted.end());
  std::string near;  // a value the pattern matches regardless of case (LIKE only)
  for (const auto& k : sorted) {
    if (near.empty() && !c.icase && likeMatch(*pattern, k, true)) near = k;
  }
  guards::GuardResult r;
  r.code = std::string(guards::codes::kUnknownValue);
  r.subject = rc.tableName();
  const std::string op = c.icase ? " ILIKE " : " LIKE ";
  r.message =
      "No value of " + c.column + " matches" + op + quoteLiteral(*pattern) + "; " +
      (sorted.size() <= kMaxNamedValues ? "its values are " + listValues(sorted, false)
                                        : "it has " + std::to_string(sorted.size()) + " values");
  if (!near.empty()) r.message += " (ILIKE would match '" + near + "')";
  r.message +=
      ". The empty result says nothing about the pattern: fix it against the column's values.";
  r.hint = near.empty() ? c.column + " = " + quoteLiteral(sorted.front())
                        : c.column + " ILIKE " + quoteLiteral(*pattern);
  r.facts.add("table", r.subject)
      .add("column", c.column)
      .add("pattern", *pattern)
      .add("value_count", static_cast<int64_t>(sorted.size()))
      .add("source", sourceOf(*rc.column));
  if (sorted.size() <= kMaxNamedValues) r.facts.add("known_values", sorted);
  if (!near.empty()) r.facts.add("near_match", near);
  out.push_back(std::move(r));
}

// The statistics could not tell, and the index found no row holding any of the values.
void probedUnknown(const ScreenInput& in, const analysis::ScreenComparison& c,
                   const ResolvedColumn& rc, Findings& out) {
  std::vector<std::string> values;
  for (const auto& v : c.values) {
    if (const std::string* text = valueText(in, v)) values.push_back(*text);
  }
  if (values.size() != c.values.size()) return;
  guards::GuardResult r;
  r.code = std::string(guards::codes::kUnknownValue);
  r.subject = rc.tableName();
  const std::string quoted = listValues(values, true, 5);
  r.message = c.column + " has no value " + quoted + ": an index lookup of " + r.subject +
              " found no row holding it. The empty result says nothing about " + quoted +
              ": check how the value is written (case, spaces, spelling).";
  const bool text = rc.column->category != 'N';
  const std::string& first = values.front();
  // Text: the same value written otherwise; a number: where the column's values lie.
  r.hint = text ? "SELECT " + c.column + " FROM " + r.subject + " WHERE lower(" + c.column +
                      ") = lower(" + quoteLiteral(first) + ") LIMIT 5"
                : "SELECT min(" + c.column + "), max(" + c.column + ") FROM " + r.subject;
  r.facts.add("table", r.subject)
      .add("column", c.column)
      .add("values", values)
      .add("source", "index_probe");
  out.push_back(std::move(r));
}

}  // namespace

void unknownValue(const ScreenInput& in, Findings& out) {
  if (!nothingMatched(in.result, *in.statement)) return;
  const auto& comparisons = in.statement->screen.comparisons;
  for (size_t i = 0; i < comparisons.size(); ++i) {
    const analysis::ScreenComparison& c = comparisons[i];
    if (c.op == analysis::ScreenComparison::Op::kLike) unmatchedPattern(in, c, out);
    if (c.op != analysis::ScreenComparison::Op::kEq || c.values.empty()) continue;
    const ResolvedColumn rc = resolveColumn(in, c.table, c.column);
    if (!rc.column) continue;
    const analysis::ColumnStats& col = *rc.column;
    // Strings, enums and numbers compare as written; dates and booleans have many spellings.
    if (col.category != 'S' && col.category != 'E' && col.category != 'N') continue;
    const std::vector<std::string>* known = valuesOf(col);
    if (!known) {
      if (in.probe && in.probe->answers(static_cast<int>(i)) && in.probe->rows == 0)
        probedUnknown(in, c, rc, out);
      continue;
    }
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
        if (near.empty() && col.category != 'N' && nearValue(k, *text)) near = k;
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
    const std::string quoted = listValues(unknown, true, 5);
    r.message = c.column + " has no value " + quoted + "; " + valuesPhrase(*known);
    if (!near.empty()) r.message += " (did you mean '" + near + "'?)";
    r.message += ". The empty result says nothing about " + quoted + ": compare with one of its values.";
    const std::string& example = near.empty() ? known->front() : near;
    r.hint = c.column + " = " + (col.category == 'N' ? example : "'" + example + "'");
    r.facts.add("table", r.subject).add("column", c.column).add("values", unknown);
    if (known->size() <= kMaxNamedValues) {
      r.facts.add("known_values", *known);
    } else {
      r.facts.add("value_count", static_cast<int64_t>(known->size()));
    }
    r.facts.add("source", sourceOf(col));
    if (!near.empty()) r.facts.add("near_match", near);
    out.push_back(std::move(r));
  }
}

}  // namespace pgwarden::screens::detail
