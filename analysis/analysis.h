// SQL analysis: one libpg_query parse per distinct text (cached), reduced to a compact
// StatementInfo per statement that every guard, budget and history record reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/keyed_read.h"
#include "analysis/screen_facts.h"

namespace pgwarden::analysis {

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

// kAll: LIMIT ALL / LIMIT NULL, which is "no limit" but occupies the LIMIT clause.
enum class LimitKind { kNone, kConstant, kParameter, kOther, kAll };

struct RelationRef {
  std::string schema;        // as written ("" when unqualified), lower-cased unless quoted
  std::string name;
  bool has_predicate = false;  // read under a non-trivial WHERE/JOIN condition
  bool written = false;        // target of INSERT/UPDATE/DELETE/MERGE
  // Some read of it sends its rows towards the client (not only inside an aggregate, a sublink,
  // EXPLAIN or a write).
  bool reaches_client = false;
  // Some read of it reaches the client with neither a non-trivial predicate nor an aggregate on
  // the way: what require_predicate looks for.
  bool unbounded_read = false;
  // A WHERE/ON clause was written for it but cannot filter (1=1, true, x = x, OR true, ...).
  bool trivial_predicate = false;
  bool operator==(const RelationRef&) const = default;
};

// A constant argument of a function call, as the parser decoded it.
struct ConstArg {
  enum class Type { kNone, kInteger, kFloat, kString, kBool, kNull };
  Type type = Type::kNone;     // kNone: not a constant (a column, an expression, a parameter)
  std::string text;            // the literal as decoded (numbers as written)
  double number = 0;           // for kInteger/kFloat
  bool operator==(const ConstArg&) const = default;
};

struct FunctionCall {
  std::string schema;          // as written ("" when unqualified)
  std::string name;            // as decoded by the parser (quotes and U& escapes resolved)
  std::vector<ConstArg> args;  // positional arguments
  bool aggregate_star = false; // f(*)
  bool operator==(const FunctionCall&) const = default;
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
  // The top level aggregates with no GROUP BY or DISTINCT: one row whatever matched, so a lone
  // zero or NULL there (count, sum, max over nothing) is what "nothing matched" looks like.
  bool plain_aggregate = false;
  bool locking_clause = false;          // FOR UPDATE/SHARE/...
  bool select_into = false;
  bool modifying_cte = false;
  bool explain_analyze = false;
  bool with_hold = false;               // DECLARE ... WITH HOLD
  bool temporary = false;               // CREATE TEMP TABLE / VIEW / TABLE AS
  bool recursive_cte = false;
  // Set/reset/show: the setting name (lower case); "all" for RESET ALL.
  std::string setting;
  // SET: the value as the server would take it back in `SET setting = '<value>'` (list
  // elements of search_path that are not plain lower-case names keep their double quotes).
  std::string setting_value;
  bool set_local = false;               // SET LOCAL (ends with the transaction)
  // Transaction control that asks for READ WRITE (BEGIN READ WRITE, SET TRANSACTION ...).
  bool read_write_requested = false;
  // For EXPLAIN, PREPARE, DECLARE, COPY (query form), CREATE TABLE AS: the inner statement's kind.
  StatementKind inner_kind = StatementKind::kOther;
  bool copy_from = false;               // COPY ... FROM
  bool copy_to_file = false;            // COPY ... TO 'file' / PROGRAM

  // Added beyond the first interface, for guards and history:
  std::string command;                  // command tag style name: "SELECT", "CREATE TABLE", "SET", ...
  std::vector<FunctionCall> calls;      // every function call with its constant arguments
  int limit_length = 0;                 // bytes of the LIMIT literal at limit_location
  int max_param = 0;                    // highest $n referenced (0: none)
  bool unbounded_recursion = false;     // WITH RECURSIVE whose recursive arm has no stop condition
  bool two_phase = false;               // PREPARE TRANSACTION / COMMIT PREPARED / ROLLBACK PREPARED
  bool chain = false;                   // COMMIT AND CHAIN / ROLLBACK AND CHAIN
  std::string savepoint;                // SAVEPOINT/RELEASE/ROLLBACK TO: the name, lower case
  // set_config(name, ...) calls: the setting names, lower case; "*" when the name is not a constant.
  std::vector<std::string> set_config_names;
  // FROM items at every query level (tables, CTE and function scans, subqueries, VALUES): two or
  // more means the statement joins something; a self-join counts two.
  int from_items = 0;
  // For the result screens (SELECT only): comparisons with constants, LIMIT without ORDER BY,
  // aggregates over joins (analysis/screen_facts.h).
  ScreenFacts screen;
  // The outermost SELECT read one table by columns equated to literals (analysis/keyed_read.h).
  KeyedRead keyed;
  // Field for field, so tests can compare a whole analysis (the shape cache's proof uses it too).
  bool operator==(const StatementInfo&) const = default;
};

struct Analysis {
  bool ok = false;
  std::string error;           // parser message when !ok
  int error_position = 0;      // 1-based cursor position, 0 unknown
  // The SQLSTATE the server would answer the text with when !ok: 42601 for what the parser
  // refuses, 22021 for a text that is not valid UTF-8, 54001 for one nested too deeply.
  std::string error_sqlstate;
  std::vector<StatementInfo> statements;
  uint64_t fingerprint = 0;    // libpg_query fingerprint of the whole text
  std::string fingerprint_hex;
  bool operator==(const Analysis&) const = default;
};

// Thread-compatible (one per event loop). Bounded LRU keyed by the exact text. Texts longer than
// `max_cached_bytes` are analysed every time rather than pinning large strings in the cache.
// Behind it, a second bounded LRU keyed by the text's shape (analysis/shape.h): on an exact miss,
// a text whose shape has a proved template (analysis/shape_template.h) gets its analysis rebuilt
// from the template with its own literals, without a parse. A shape gets a template the second
// time it is seen, if probing proves one; a shape that fails is remembered and not probed again.
class Analyzer {
 public:
  explicit Analyzer(size_t cache_entries = 4096, size_t max_cached_bytes = 64 * 1024);
  ~Analyzer();
  std::shared_ptr<const Analysis> analyze(std::string_view sql);
  // The same; `shape` is set to the id of the shape template the analysis was rebuilt from
  // (analysis/shape_template.h), 0 when it was not: texts with one such id differ only in the
  // values of their literals, within the value categories of analysis/shape.h.
  std::shared_ptr<const Analysis> analyze(std::string_view sql, uint64_t& shape);
  uint64_t cacheHits() const;
  uint64_t cacheMisses() const;
  size_t cacheSize() const;
  // Exact misses served from a shape template, and shape-cacheable exact misses that were not.
  uint64_t shapeHits() const;
  uint64_t shapeMisses() const;
  size_t shapeCacheSize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The deepest parse tree analysed (levels of libpg_query's JSON output). PostgreSQL 15 with its
// default max_stack_depth (2MB) runs up to 2,111 nested scalar subqueries (14,788 levels), 4,515
// nested coalesce() (13,556) or a 4,092-term 1+1+... (8,193); a deeper text is refused with a
// message that says so. libpg_query's output and the walkers recurse over the tree, so a thread
// whose free stack is smaller walks less (analysis.cpp, treeDepthHere): an 8 MiB loop thread
// walks all of kMaxTreeDepth, a 1 MiB one 1,024 levels.
inline constexpr size_t kMaxTreeDepth = 16384;

// Uncached analysis (what the cache calls on a miss).
std::shared_ptr<const Analysis> analyzeUncached(std::string_view sql);

// "" when `text` is valid UTF-8 as the server checks it; otherwise the server's own message for
// it ('invalid byte sequence for encoding "UTF8": 0xe9 0x27', SQLSTATE 22021).
std::string invalidUtf8Message(std::string_view text);

}  // namespace pgwarden::analysis
