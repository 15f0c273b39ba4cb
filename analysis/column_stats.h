// What the catalog knows about one column's values: enum labels, a CHECK constraint's IN-list,
// pg_stats' most common values with their frequencies, n_distinct and the histogram bounds. The
// result screens read it to tell an empty answer from a wrong question. Parsed from the text rows
// of columnStatsQuery(), never on the statement path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::guards {

struct ColumnStats {
  std::string type;                        // format_type(): "text", "date", "status_t", ...
  char category = 'X';                     // pg_type.typcategory: 'S' string, 'N' numeric, 'D' date/time, 'E' enum
  std::vector<std::string> enum_labels;    // in sort order (enum columns)
  std::vector<std::string> check_values;   // a CHECK (col IN (...)) constraint's values
  std::vector<std::string> mcv;            // pg_stats.most_common_vals
  std::vector<double> mcv_freqs;           // pg_stats.most_common_freqs, same order
  double n_distinct = 0;                   // pg_stats.n_distinct (negative: a fraction of the rows)
  bool analyzed = false;                   // pg_stats has a row for the column
  std::vector<std::string> histogram;      // pg_stats.histogram_bounds (first = low, last = high)
  bool unique = false;                     // a unique index (or primary key) on this column alone

  // Every value occurs once: a unique index, or pg_stats' n_distinct of -1.
  bool knownUnique() const { return unique || (analyzed && n_distinct <= -0.999); }
  // Values repeat: analysed, no unique index, and n_distinct says so.
  bool knownRepeating() const { return !unique && analyzed && n_distinct > -0.999 && n_distinct != 0; }

  // The column's complete set of values when the catalog knows it, in order of trust: enum labels,
  // the CHECK IN-list, or the MCVs when the column has few values (n_distinct small) and they
  // cover nearly every row. Null when the values are not known to be complete.
  const std::vector<std::string>* knownValues() const;
  // The lowest and highest value the statistics saw (histogram bounds and MCVs), for numeric and
  // date/time columns. False when there are no statistics or the type is not ordered here.
  bool bounds(std::string* low, std::string* high) const;
};

// The catalog query the refresher runs next to the tables query: one row per column that has an
// enum type, a single-column CHECK constraint or a pg_stats row. Columns: schema, table, column,
// type, typcategory, enum labels (array text), CHECK definitions ("; "-joined), most_common_vals,
// most_common_freqs, n_distinct, histogram_bounds (low and high only), analysed, unique.
const char* columnStatsQuery();

struct ColumnRow {
  std::string schema, table, column;
  ColumnStats stats;
};
// One row of columnStatsQuery() parsed, or nothing when the row is malformed.
std::optional<ColumnRow> parseColumnRow(const std::vector<std::string>& row);

// A one-dimensional PostgreSQL array in text form ({a,"b c",NULL}); NULL elements are left out.
// Nothing when the text is not such an array.
std::optional<std::vector<std::string>> parseArrayText(std::string_view text);

// The quoted literals of a CHECK constraint of the form col = ANY (ARRAY['a'::text, ...]) or
// col IN ('a', ...) as pg_get_constraintdef prints it; empty for any other shape.
std::vector<std::string> checkInList(std::string_view def);

// Compares two values of an ordered category ('N' numerically, 'D' as ISO text): <0, 0, >0;
// nothing when either does not read as that category.
std::optional<int> compareValues(char category, std::string_view a, std::string_view b);

}  // namespace pgwarden::guards
