// SQL analysis: one libpg_query parse per distinct text (cached), reduced to a compact
// StatementInfo per statement that every guard, budget and history record reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::guards {

enum class StatementKind {
  kSelect, kInsert, kUpdate, kDelete, kMerge,
  kDdl,            // CREATE/ALTER/DROP/COMMENT/GRANT/... (incl. CREATE TABLE AS, temp tables)
  kTransaction,    // BEGIN/START/COMMIT/ROLLBACK/SAVEPOINT/SET TRANSACTION...
  kSet, kReset, kShow,
  kExplain,
  kCopy,
  kCall, kDo,
  kPrepare, kExecute, kDeallocate,
  kDeclareCursor, kFetch, kClosePortal,
  kListen, kNotify, kUnlisten,
  kDiscard,
  kMaintenance,    // VACUUM/ANALYZE/CLUSTER/REINDEX/CHECKPOINT/REFRESH MATERIALIZED VIEW
  kLock,
  kAlterSystem,
  kLoad,
  kOther,
};
const char* kindName(StatementKind kind);  // "select", "insert", ...

enum class Intent { kCatalog, kLookup, kAggregation, kWrite, kDdl, kAdmin, kOther };
const char* intentName(Intent intent);     // "catalog", "lookup", ...

enum class LimitKind { kNone, kConstant, kParameter, kOther };

struct RelationRef {
  std::string schema;        // as written ("" when unqualified), lower-cased unless quoted
  std::string name;
  bool has_predicate = false;  // read under a non-trivial WHERE/JOIN condition
  bool written = false;        // target of INSERT/UPDATE/DELETE/MERGE
};

struct StatementInfo {
  StatementKind kind = StatementKind::kOther;
  Intent intent = Intent::kOther;
  int location = 0;            // byte offset of the statement in the text
  int length = 0;              // byte length (0 = to the end)
  std::vector<RelationRef> relations;   // tables/views read or written (CTE names excluded)
  std::vector<std::string> functions;   // as written, schema-qualified when written so
  LimitKind limit = LimitKind::kNone;   // outermost LIMIT
  int64_t limit_value = -1;
  int limit_location = -1;              // byte offset of the LIMIT expression, when constant
  bool returns_rows = false;            // a row-returning read
  bool has_aggregate = false;           // aggregate or GROUP BY/DISTINCT at the top level
  bool locking_clause = false;          // FOR UPDATE/SHARE/...
  bool select_into = false;
  bool modifying_cte = false;
  bool explain_analyze = false;
  bool with_hold = false;               // DECLARE ... WITH HOLD
  bool recursive_cte = false;
  // Set/reset/show: the setting name (lower case); "all" for RESET ALL.
  std::string setting;
  std::string setting_value;
  // Transaction control that asks for READ WRITE (BEGIN READ WRITE, SET TRANSACTION ...).
  bool read_write_requested = false;
  // For EXPLAIN, PREPARE, DECLARE, COPY (query form), CREATE TABLE AS: the inner statement's kind.
  StatementKind inner_kind = StatementKind::kOther;
  bool copy_from = false;               // COPY ... FROM
  bool copy_to_file = false;            // COPY ... TO 'file' / PROGRAM
};

struct Analysis {
  bool ok = false;
  std::string error;           // parser message when !ok
  int error_position = 0;      // 1-based cursor position, 0 unknown
  std::vector<StatementInfo> statements;
  uint64_t fingerprint = 0;    // libpg_query fingerprint of the whole text
  std::string fingerprint_hex;
};

// Thread-compatible (one per event loop). Bounded LRU keyed by the exact text.
class Analyzer {
 public:
  explicit Analyzer(size_t cache_entries = 4096);
  ~Analyzer();
  std::shared_ptr<const Analysis> analyze(std::string_view sql);
  uint64_t cacheHits() const;
  uint64_t cacheMisses() const;
  size_t cacheSize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Uncached analysis (what the cache calls on a miss).
std::shared_ptr<const Analysis> analyzeUncached(std::string_view sql);

}  // namespace pgwarden::guards
