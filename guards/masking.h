// Masked columns (docs/masking.md): a group's `masked_columns` patterns, resolved against the
// catalog snapshot to (table OID, attribute number) pairs, the token that replaces a value, and
// the rewrite of the RowDescription and DataRow messages the doors relay. The server computes on
// the real values (WHERE, GROUP BY, joins, count(DISTINCT)); the client sees a token per value,
// equal for equal values, or NULL. Which statements may mention a masked column at all is the
// guard's business (guard_masked.cpp). Pure but for the resolution cache.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/table_stats.h"
#include "protocol/messages.h"

namespace pgwarden::guards {

// One `schema.table.column` pattern; `*` in a part matches any run of characters.
struct MaskPattern {
  std::string schema, table, column;
  bool matches(std::string_view s, std::string_view t, std::string_view c) const;
  bool matchesTable(std::string_view s, std::string_view t) const;
};

// The `schema.table.column` patterns listed under `key` of `node` (config errors name the entry).
std::vector<MaskPattern> parseColumnPatterns(const YAML::Node& node, const std::string& path,
                                             const char* key);

// The patterns resolved against one snapshot.
class MaskSet {
 public:
  MaskSet(const std::vector<MaskPattern>& patterns, const analysis::TableStatsSnapshot* stats);
  // A column of a result: masked when listed, and also when its table is a user table the
  // snapshot does not know yet (created since the last refresh): masking fails closed.
  bool masked(uint32_t table_oid, int16_t attnum) const;
  uint64_t generation() const { return generation_; }
  std::shared_ptr<const analysis::TableStatsSnapshot>
      visible;  // the snapshot without their statistics

 private:
  std::set<std::pair<uint32_t, int16_t>> columns_;
  std::unordered_set<uint32_t> known_tables_;
  uint64_t generation_ = 0;
  bool have_stats_ = false;
};

// Which columns of one result are masked, from its RowDescription.
struct RowMask {
  std::vector<bool> masked;  // by column
  bool any = false;
  // By column: the type OID of a column the server sends in binary format, 0 for text format.
  std::vector<uint32_t> binary_type;
};

// The text form the server would have sent for a binary-format value of type `type_oid`, for the
// types whose text form does not depend on session settings (the string types, json and jsonb,
// bool, the integers, oid, numeric, uuid); nullopt for the others or a malformed value. A token
// is made over the text form, so both formats give one token for one value.
std::optional<std::string> binaryAsText(uint32_t type_oid, std::string_view value);

// A group's masking: its patterns, how values are replaced, the instance's key.
class Masking {
 public:
  // Reads `masked_columns` (a list of patterns), `masked_as` (token or null) and `schema_only`
  // of a group; nullptr when the group masks nothing.
  static std::shared_ptr<Masking> parse(const YAML::Node& group, const std::string& path);
  Masking(std::vector<MaskPattern> patterns, bool as_null, bool schema_only = false)
      : patterns_(std::move(patterns)), as_null_(as_null), schema_only_(schema_only) {}

  const std::vector<MaskPattern>& patterns() const { return patterns_; }
  bool asNull() const { return as_null_; }
  // `schema_only: true` (docs/schema-only.md): every column of every user table masked as NULL,
  // no statistics values, no samples; the callers see the schema and counts.
  bool schemaOnly() const { return schema_only_; }
  // The per-instance key tokens are made with (daemon.state_dir/mask.key); set once by the
  // daemon before the configuration is published.
  void setKey(std::string key) { key_ = std::move(key); }
  const std::string& key() const { return key_; }

  // The set for this snapshot (null: not loaded yet), resolved once per snapshot generation.
  std::shared_ptr<const MaskSet> resolve(const analysis::TableStatsSnapshot* stats) const;
  // The snapshot without the statistics of masked columns (most common values, bounds: their
  // values), for the guards and the screens; resolved once per snapshot generation.
  std::shared_ptr<const analysis::TableStatsSnapshot> visibleStats(
      const analysis::TableStatsSnapshot* stats) const;
  // The masked columns of a result described by `row_description` (a RowDescription's body).
  RowMask rowMask(std::string_view row_description,
                  const analysis::TableStatsSnapshot* stats) const;
  // The masked column names of a table a statement mentions (schema "" when unqualified: any).
  // With no snapshot, the patterns' own column parts ("*" when a part has a wildcard).
  std::vector<std::string> maskedNames(std::string_view schema, std::string_view table,
                                       const analysis::TableStatsSnapshot* stats) const;
  // Whether a statement over `relations` may hold a masked column's value among its constants
  // (`WHERE ssn = '...'`), so that history keeps it with its constants taken out: it names a
  // table with masked columns, or one that is not a table the snapshot knows (a view, a table
  // created since, a CTE: fails closed), or the group sees the schema only.
  bool constantsMayBeValues(const std::vector<analysis::RelationRef>& relations,
                            const analysis::TableStatsSnapshot* stats) const;

 private:
  std::vector<MaskPattern> patterns_;
  bool as_null_ = false;
  bool schema_only_ = false;
  std::string key_;
  mutable std::mutex mutex_;
  mutable std::vector<std::shared_ptr<const MaskSet>> resolved_;  // the last few snapshots
};

// "m_" and 16 base32 characters of HMAC-SHA256(key, value): equal values, equal tokens.
std::string maskToken(std::string_view key, std::string_view value);

// The RowDescription with each masked column described as text (type 25, length -1, no
// modifier), so the token fits whatever the column's type was; appended to `out` as a message.
void appendMaskedRowDescription(std::string& out, std::string_view body, const RowMask& mask);
// The DataRow with each masked, non-NULL value replaced by its token (or NULL); appended to
// `out` as a message. A malformed row is replaced by one of NULLs (or nothing, when even its
// column count cannot be read): the value never passes unmasked.
void appendMaskedDataRow(std::string& out, std::string_view body, const RowMask& mask,
                         const Masking& masking);

// The same for a row already split into cells (the MCP door).
void maskCells(std::vector<std::optional<std::string>>& row, const RowMask& mask,
               const Masking& masking);

}  // namespace pgwarden::guards
