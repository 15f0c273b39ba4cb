// What the catalog knows about one column's values: enum labels, a CHECK constraint's IN-list,
// pg_stats' most common values with their frequencies, n_distinct and the histogram bounds, or
// min/max read through a btree index when pg_stats has nothing. The result screens read it to tell
// an empty answer from a wrong question. Parsed from the text rows of columnStatsQuery() and
// boundsProbeQuery(), never on the statement path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::analysis {

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
  // The leading key of a valid, non-partial btree index (a number, a date/time or a string), in a
  // table without row security whose column pgwarden's connection may read: min/max of it costs
  // two index probes, and so does the screens' count of one value (screens/probe.h).
  bool leads_btree = false;
  std::string index_low, index_high;       // min/max read through that index (boundsProbeQuery())
  bool not_null = false;                   // pg_attribute.attnotnull
  double null_frac = 0;                    // pg_stats.null_frac: the share of rows holding NULL
  std::string references;  // a single-column foreign key's target, "schema.table.column"
  // A string column with more values than the MCVs name, whose histogram and MCVs together list
  // every value it held at the last ANALYZE (sorted); empty otherwise.
  std::vector<std::string> all_values;

  // Every value occurs once: a unique index, or pg_stats' n_distinct of -1.
  bool knownUnique() const { return unique || (analyzed && n_distinct <= -0.999); }
  // Values repeat: analysed, no unique index, and n_distinct says so.
  bool knownRepeating() const { return !unique && analyzed && n_distinct > -0.999 && n_distinct != 0; }

  // The column's complete set of values when the catalog knows it, in order of trust: enum labels,
  // the CHECK IN-list, or the MCVs when the column has few values (n_distinct small) and they
  // cover nearly every row. Null when the values are not known to be complete.
  const std::vector<std::string>* knownValues() const;
  // The lowest and highest value the statistics saw (histogram bounds and MCVs), for numeric and
  // date/time columns; when pg_stats has none, the index's min/max. False when neither is known or
  // the type is not ordered here. `source`, when given, is set to "pg_stats" or "index".
  bool bounds(std::string* low, std::string* high, const char** source = nullptr) const;
  // pg_stats gives no bounds, but a btree index leads with the column and its type is one the
  // screens compare: the refresher reads min/max through the index (boundsProbeQuery()).
  bool needsIndexBounds() const;

 private:
  bool statsBounds(std::string* low, std::string* high) const;
};

// A soft-delete column, by name and type: deleted_at, archived_at, removed_at, deleted_on,
// archived_on of a date/time type; is_deleted, deleted, is_archived, archived, is_removed of type
// boolean (SOFT_DELETED_ROWS).
bool softDeleteColumn(std::string_view name, const ColumnStats& c);
// Whether any catalog row parsed in this process named such a column: until one does, no read can
// be flagged for its deleted rows, and results are screened by their shape alone.
bool softDeleteColumnsSeen();
// A group declares soft-delete columns in its config (`soft_delete_columns`): reads are screened
// for them from now on, as if the catalog had named one.
void noteSoftDeleteDeclared();

// Numbers and dates/timestamps: the types whose text compareValues() reads, so the only ones
// worth reading bounds of (money, oid, time of day and intervals are left out).
bool boundableType(char category, std::string_view type);

// The query that reads a column's min and max, cast to text, with the given statement_timeout
// (SET LOCAL: it ends with the Query's implicit transaction). Meant for a column whose
// needsIndexBounds() holds, where PostgreSQL answers it with two LIMIT 1 index scans
// (MinMaxAgg); the timeout keeps anything else from holding the refresh. Identifiers are always
// double-quoted, quotes in them doubled.
std::string boundsProbeQuery(std::string_view schema, std::string_view table, std::string_view column,
                             int timeout_ms);
// `name` as a double-quoted SQL identifier, quotes in it doubled.
std::string quotedIdentifier(std::string_view name);
// That query's row (min, max; empty text for NULL) read into `low` and `high`: false when the
// table is empty or a value is too long to be a number or a date.
bool parseBoundsRow(const std::vector<std::string>& row, std::string* low, std::string* high);

// The catalog query the refresher runs next to the tables query: one row per column that has an
// enum type, a single-column CHECK constraint, a pg_stats row, a unique index or leads a btree
// index (numbers and dates only). Columns: schema, table, column,
// type, typcategory, enum labels (array text), CHECK definitions ("; "-joined), most_common_vals,
// most_common_freqs, n_distinct, histogram_bounds (low and high only), analysed, unique,
// leads_btree, not null, null_frac, the foreign key's target. Columns of a single-column foreign
// key are included too.
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

}  // namespace pgwarden::analysis
