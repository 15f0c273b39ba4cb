// Column statistics for the result screens: the catalog query and the parsing of its text rows
// (PostgreSQL array literals, CHECK constraint IN-lists). Runs when a refresh lands, on the loop,
// never per statement.
#include "analysis/column_stats.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace pgwarden::analysis {

namespace {

// Wide texts (a long MCV list of long strings) are left out rather than fail a refresh whose rows
// must each stay below the server connection's streaming threshold.
#define PGW_CAPPED(expr) "CASE WHEN length(" expr ") <= 16384 THEN " expr " ELSE '' END"

// The MCVs count as every value when there are few distinct values and they cover nearly all rows.
constexpr double kMaxKnownDistinct = 64;
constexpr double kMinCoverage = 0.99;

std::optional<double> toDouble(std::string_view s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  const std::string copy(s);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  return v;
}

bool isoDate(std::string_view s) {
  if (s.size() < 10) return false;
  for (size_t i = 0; i < 10; ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(s[i])) != 0;
    if ((i == 4 || i == 7) ? s[i] != '-' : !digit) return false;
  }
  return s.size() == 10 || s[10] == ' ' || s[10] == 'T';
}

}  // namespace

const char* columnStatsQuery() {
  return "SELECT n.nspname, c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod),"
         " t.typcategory::text,"
         " coalesce((SELECT array_agg(e.enumlabel ORDER BY e.enumsortorder)::text"
         "   FROM pg_catalog.pg_enum e WHERE e.enumtypid = a.atttypid), ''),"
         " coalesce((SELECT string_agg(pg_catalog.pg_get_constraintdef(k.oid), '; ')"
         "   FROM pg_catalog.pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'c'"
         "   AND k.conkey = ARRAY[a.attnum]), ''),"
         " coalesce(" PGW_CAPPED("s.most_common_vals::text") ", ''),"
         " coalesce(" PGW_CAPPED("s.most_common_freqs::text") ", ''),"
         " coalesce(s.n_distinct::text, ''),"
         " coalesce(CASE WHEN t.typcategory IN ('N', 'D') THEN"
         "   ARRAY[(s.histogram_bounds::text::text[])[1],"
         "     (s.histogram_bounds::text::text[])[array_upper(s.histogram_bounds::text::text[], 1)]]::text"
         // A string column's whole histogram when, with the MCVs, it lists as many values as the
         // column has (ColumnStats::all_values), up to kMaxListedValues.
         "   WHEN t.typcategory = 'S' AND s.n_distinct <> 0 AND"
         "     coalesce(array_length(s.most_common_vals::text::text[], 1), 0) +"
         "     array_length(s.histogram_bounds::text::text[], 1) >= CASE WHEN s.n_distinct > 0"
         "     THEN s.n_distinct ELSE -s.n_distinct * c.reltuples END AND"
         "     array_length(s.histogram_bounds::text::text[], 1) <= 256"
         "   THEN s.histogram_bounds::text END, ''),"
         " (s.attname IS NOT NULL)::text, u.is_unique::text, u.leads_btree::text,"
         " a.attnotnull::text, coalesce(s.null_frac::text, ''),"
         // The column a single-column foreign key of this column references, "schema.table.column".
         " coalesce((SELECT rn.nspname || '.' || rc.relname || '.' || ra.attname"
         "   FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class rc ON rc.oid = k.confrelid"
         "   JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace"
         "   JOIN pg_catalog.pg_attribute ra ON ra.attrelid = k.confrelid AND ra.attnum = k.confkey[1]"
         "   WHERE k.conrelid = c.oid AND k.contype = 'f' AND k.conkey = ARRAY[a.attnum] LIMIT 1), '')"
         " FROM pg_catalog.pg_attribute a"
         " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
         " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
         " JOIN pg_catalog.pg_type t ON t.oid = a.atttypid"
         " LEFT JOIN pg_catalog.pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname"
         "   AND s.attname = a.attname AND s.inherited = (c.relkind = 'p')"
         " CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_index i"
         "   WHERE i.indrelid = c.oid AND i.indisunique AND i.indnkeyatts = 1"
         "   AND i.indkey[0] = a.attnum AND i.indpred IS NULL AND i.indisvalid AND i.indimmediate)"
         "   AS is_unique,"
         // min/max through the index (boundsProbeQuery()): a plain table, no row security (its
         // min/max could name rows a caller's policy hides; pg_stats hides those too), a column
         // the connection may read, a valid non-partial btree index that leads with it.
         // Strings too: the screens' probe (screens/probe.h) counts a value through it.
         "   t.typcategory IN ('N', 'D', 'S') AND c.relkind IN ('r', 'p', 'm') AND NOT c.relrowsecurity"
         "   AND pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT')"
         "   AND EXISTS (SELECT 1 FROM pg_catalog.pg_index i"
         "     JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid"
         "     JOIN pg_catalog.pg_am am ON am.oid = ic.relam"
         "     WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum AND i.indisvalid"
         "     AND i.indpred IS NULL AND am.amname = 'btree') AS leads_btree) u"
         " WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'm', 'f')"
         " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
         " AND n.nspname !~ '^pg_(toast|temp_)'"
         " AND (t.typtype = 'e' OR s.attname IS NOT NULL OR u.is_unique OR u.leads_btree OR EXISTS (SELECT 1 FROM"
         "   pg_catalog.pg_constraint k WHERE k.conrelid = c.oid AND k.contype IN ('c', 'f')"
         "   AND k.conkey = ARRAY[a.attnum]))";
}

#undef PGW_CAPPED

std::optional<std::vector<std::string>> parseArrayText(std::string_view text) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return std::nullopt;
  std::vector<std::string> out;
  const std::string_view body = text.substr(1, text.size() - 2);
  if (body.empty()) return out;
  size_t i = 0;
  while (i <= body.size()) {
    std::string item;
    bool quoted = false;
    if (i < body.size() && body[i] == '"') {
      quoted = true;
      ++i;
      while (i < body.size() && body[i] != '"') {
        if (body[i] == '\\' && i + 1 < body.size()) ++i;
        item.push_back(body[i++]);
      }
      if (i >= body.size()) return std::nullopt;  // unterminated
      ++i;
    } else {
      while (i < body.size() && body[i] != ',') {
        if (body[i] == '{' || body[i] == '"') return std::nullopt;  // nested or malformed
        item.push_back(body[i++]);
      }
    }
    if (quoted || item != "NULL") out.push_back(std::move(item));
    if (i >= body.size()) break;
    if (body[i] != ',') return std::nullopt;
    ++i;
  }
  return out;
}

std::vector<std::string> checkInList(std::string_view def) {
  std::vector<std::string> out;
  // Only a single IN-list: anything combined with AND/OR is not the column's whole domain.
  if (def.find(" OR ") != std::string_view::npos || def.find(" AND ") != std::string_view::npos) return out;
  const size_t any = def.find("= ANY");
  if (any == std::string_view::npos) return out;
  const size_t open = def.find("ARRAY[", any);
  const size_t close = open == std::string_view::npos ? open : def.find(']', open);
  if (close == std::string_view::npos) return out;
  for (size_t i = open + 6; i < close; ++i) {
    if (def[i] != '\'') continue;
    std::string item;
    ++i;
    while (i < def.size()) {
      if (def[i] == '\'') {
        if (i + 1 < def.size() && def[i + 1] == '\'') {
          item.push_back('\'');
          i += 2;
          continue;
        }
        break;
      }
      item.push_back(def[i++]);
    }
    out.push_back(std::move(item));
  }
  return out;
}

namespace {
std::atomic<bool> soft_delete_seen{false};

// A string column whose MCVs and histogram bounds, all distinct, are as many as its distinct
// values (ANALYZE read every row: its n_distinct is then a count): they are every value it held.
void listAllValues(ColumnStats& s) {
  if (!s.analyzed || s.histogram.empty() || s.n_distinct == 0) return;
  std::vector<std::string> all = s.histogram;
  all.insert(all.end(), s.mcv.begin(), s.mcv.end());
  std::sort(all.begin(), all.end());
  if (std::adjacent_find(all.begin(), all.end()) != all.end()) return;  // a bound repeats
  if (s.n_distinct > 0 && static_cast<double>(all.size()) < s.n_distinct) return;
  s.all_values = std::move(all);
  s.histogram.clear();  // only N and D columns' bounds are read from it
}

}  // namespace

void noteSoftDeleteDeclared() { soft_delete_seen.store(true, std::memory_order_relaxed); }

bool softDeleteColumn(std::string_view n, const ColumnStats& c) {
  if (c.category == 'D') {
    return n == "deleted_at" || n == "archived_at" || n == "removed_at" || n == "deleted_on" ||
           n == "archived_on";
  }
  return c.type == "boolean" && (n == "is_deleted" || n == "deleted" || n == "is_archived" ||
                                 n == "archived" || n == "is_removed");
}

bool softDeleteColumnsSeen() { return soft_delete_seen.load(std::memory_order_relaxed); }

std::optional<ColumnRow> parseColumnRow(const std::vector<std::string>& row) {
  if (row.size() < 12 || row[0].empty() || row[1].empty() || row[2].empty()) return std::nullopt;
  ColumnRow out;
  out.schema = row[0];
  out.table = row[1];
  out.column = row[2];
  ColumnStats& s = out.stats;
  s.type = row[3];
  s.category = row[4].empty() ? 'X' : row[4][0];
  if (auto labels = parseArrayText(row[5])) s.enum_labels = std::move(*labels);
  // Several constraints are joined with "; "; the first that is an IN-list wins.
  std::string_view defs = row[6];
  while (!defs.empty() && s.check_values.empty()) {
    const size_t sep = defs.find("; ");
    s.check_values = checkInList(defs.substr(0, sep));
    defs = sep == std::string_view::npos ? std::string_view() : defs.substr(sep + 2);
  }
  if (auto mcv = parseArrayText(row[7])) s.mcv = std::move(*mcv);
  if (auto freqs = parseArrayText(row[8])) {
    for (const auto& f : *freqs) {
      auto v = toDouble(f);
      if (!v) break;
      s.mcv_freqs.push_back(*v);
    }
  }
  if (s.mcv_freqs.size() != s.mcv.size()) s.mcv_freqs.clear();
  s.n_distinct = toDouble(row[9]).value_or(0);
  if (auto h = parseArrayText(row[10])) s.histogram = std::move(*h);
  s.analyzed = row[11] == "true";
  s.unique = row.size() > 12 && row[12] == "true";
  s.leads_btree = row.size() > 13 && row[13] == "true";
  s.not_null = row.size() > 14 && row[14] == "true";
  if (row.size() > 15) s.null_frac = toDouble(row[15]).value_or(0);
  if (row.size() > 16) s.references = row[16];
  if (softDeleteColumn(out.column, s)) soft_delete_seen.store(true, std::memory_order_relaxed);
  if (s.category == 'S') listAllValues(s);
  return out;
}

const std::vector<std::string>* ColumnStats::knownValues() const {
  if (!enum_labels.empty()) return &enum_labels;
  if (!check_values.empty()) return &check_values;
  if (!analyzed || mcv.empty() || mcv_freqs.size() != mcv.size()) return nullptr;
  // n_distinct > 0 is a count; a negative one is a fraction of the rows: many values.
  if (n_distinct <= 0 || n_distinct > kMaxKnownDistinct) return nullptr;
  if (static_cast<double>(mcv.size()) < n_distinct) return nullptr;
  double covered = 0;
  for (double f : mcv_freqs) covered += f;
  return covered >= kMinCoverage ? &mcv : nullptr;
}

std::optional<int> compareValues(char category, std::string_view a, std::string_view b) {
  if (category == 'N') {
    const auto x = toDouble(a), y = toDouble(b);
    if (!x || !y) return std::nullopt;
    return *x < *y ? -1 : (*x > *y ? 1 : 0);
  }
  if (category == 'D') {
    // Dates only: a timestamp's time of day and zone are ignored, so a comparison never claims
    // more than whole days can show.
    if (!isoDate(a) || !isoDate(b)) return std::nullopt;
    const int c = a.substr(0, 10).compare(b.substr(0, 10));
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return std::nullopt;
}

bool ColumnStats::statsBounds(std::string* low, std::string* high) const {
  if (!analyzed || (category != 'N' && category != 'D')) return false;
  std::vector<const std::string*> seen;
  for (const auto& v : histogram) seen.push_back(&v);
  for (const auto& v : mcv) seen.push_back(&v);
  const std::string* lo = nullptr;
  const std::string* hi = nullptr;
  for (const std::string* v : seen) {
    auto lc = lo ? compareValues(category, *v, *lo) : std::optional<int>(-1);
    auto hc = hi ? compareValues(category, *v, *hi) : std::optional<int>(1);
    if (!lc || !hc) return false;  // a value that does not read as its type: say nothing
    if (*lc < 0) lo = v;
    if (*hc > 0) hi = v;
  }
  if (!lo || !hi) return false;
  *low = *lo;
  *high = *hi;
  return true;
}

bool ColumnStats::bounds(std::string* low, std::string* high, const char** source) const {
  if (statsBounds(low, high)) {
    if (source) *source = "pg_stats";
    return true;
  }
  if (index_low.empty() || index_high.empty() || !boundableType(category, type)) return false;
  // Both must read as the type, low first: anything else is not a range the screens can trust.
  if (compareValues(category, index_low, index_high).value_or(1) > 0) return false;
  *low = index_low;
  *high = index_high;
  if (source) *source = "index";
  return true;
}

bool ColumnStats::needsIndexBounds() const {
  std::string low, high;
  return leads_btree && boundableType(category, type) && !statsBounds(&low, &high);
}

bool boundableType(char category, std::string_view type) {
  if (category == 'N') {
    return type == "smallint" || type == "integer" || type == "bigint" || type == "real" ||
           type == "double precision" || type.substr(0, 7) == "numeric";
  }
  return category == 'D' && (type == "date" || type.substr(0, 9) == "timestamp");
}

std::string quotedIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string boundsProbeQuery(std::string_view schema, std::string_view table, std::string_view column,
                             int timeout_ms) {
  const std::string col = quotedIdentifier(column);
  return "SET LOCAL statement_timeout = " + std::to_string(timeout_ms) + "; SELECT min(" + col +
         ")::text, max(" + col + ")::text FROM " + quotedIdentifier(schema) + "." +
         quotedIdentifier(table);
}

bool parseBoundsRow(const std::vector<std::string>& row, std::string* low, std::string* high) {
  // Longer than any date or timestamp and than a number compareValues() reads.
  constexpr size_t kMaxBoundBytes = 64;
  if (row.size() != 2 || row[0].empty() || row[1].empty()) return false;
  if (row[0].size() > kMaxBoundBytes || row[1].size() > kMaxBoundBytes) return false;
  *low = row[0];
  *high = row[1];
  return true;
}

}  // namespace pgwarden::analysis
