// The history table as both SQL stores hold it: one column list, the DDL for SQLite and for
// PostgreSQL, and the mapping from a Record to column values. docs/history.md describes it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "history/record.h"
#include "history/text.h"

namespace pgwarden::history {

inline constexpr const char* kHistoryTable = "pgwarden_history";
inline constexpr const char* kSchemaTable = "pgwarden_history_schema";
// 2: record_uid (the spool id that makes a record written twice harmless), added in place to a
// version-1 table. 3: warnings (the result screens' findings), added in place likewise. 4:
// tool_name and tool_args (the MCP tool a statement ran for), likewise. 5 (SQLite): the unique
// index on record_uid gives way to kSpoolTable, the highest sequence number stored per spool epoch,
// written in each batch's transaction; the index cost the writer more than any other but
// conversation_id's. PostgreSQL keeps its index. 6: chain_seq, chain_key and chain_hash (the
// tamper-evident chain, history/chain.h), added in place; 0 and '' in rows written before. 7:
// request_id and traceparent (the MCP request a statement ran for), added in place. 8: host (the
// upstream host a statement ran on: "primary" or a read replica's host:port), added in place.
inline constexpr int kSchemaVersion = 8;
inline constexpr const char* kUidColumn = "record_uid";
inline constexpr const char* kUidIndex = "pgwarden_history_record_uid_idx";
inline constexpr const char* kSpoolTable = "pgwarden_history_spool";
inline constexpr const char* kWarningsColumn = "warnings";
inline constexpr const char* kToolNameColumn = "tool_name";
inline constexpr const char* kToolArgsColumn = "tool_args";
inline constexpr const char* kChainSeqColumn = "chain_seq";
inline constexpr const char* kChainKeyColumn = "chain_key";
inline constexpr const char* kChainHashColumn = "chain_hash";
inline constexpr const char* kRequestIdColumn = "request_id";
inline constexpr const char* kTraceparentColumn = "traceparent";
inline constexpr const char* kHostColumn = "host";
// Positions in kColumns that code reaches by name.
inline constexpr size_t kInstanceIdField = 3;
inline constexpr size_t kStartedAtField = 0;
inline constexpr size_t kChainSeqField = 33;
inline constexpr size_t kChainKeyField = 34;
inline constexpr size_t kChainHashField = 35;
// Columns from here on (before record_uid) came after the chain: they enter a row's chain hash
// only when set, so the rows hashed before they existed still verify.
inline constexpr size_t kFirstPostChainField = 36;
inline constexpr size_t kRecordUidField = 39;

// kUid: text, NULL when empty (records without a spool id), unique when set.
enum class ColumnType { kTimestamp, kInt, kText, kBool, kJson, kUid };

struct Column {
  const char* name;
  ColumnType type;
};

// Every column but `id` (which the store assigns), in insert order.
inline constexpr std::array<Column, 40> kColumns{{
    {"started_at", ColumnType::kTimestamp},   {"finished_at", ColumnType::kTimestamp},
    {"duration_us", ColumnType::kInt},        {"instance_id", ColumnType::kText},
    {"session_id", ColumnType::kInt},         {"user_name", ColumnType::kText},
    {"database_name", ColumnType::kText},     {"policy_group", ColumnType::kText},
    {"client_addr", ColumnType::kText},       {"application_name", ColumnType::kText},
    {"agent_id", ColumnType::kText},          {"conversation_id", ColumnType::kText},
    {"query_intent_sent", ColumnType::kText}, {"query_intent_inferred", ColumnType::kText},
    {"statement_kind", ColumnType::kText},    {"tables", ColumnType::kJson},
    {"sql_text", ColumnType::kText},          {"sql_truncated", ColumnType::kBool},
    {"fingerprint", ColumnType::kText},       {"guard_actions", ColumnType::kJson},
    {"outcome", ColumnType::kText},           {"deny_code", ColumnType::kText},
    {"sqlstate", ColumnType::kText},          {"error_message", ColumnType::kText},
    {"rows_returned", ColumnType::kInt},      {"result_truncated", ColumnType::kBool},
    {"rows_affected", ColumnType::kInt},      {"bytes_sent", ColumnType::kInt},
    {"protocol", ColumnType::kText},          {"single_zero", ColumnType::kBool},
    {"warnings", ColumnType::kInt},           {"tool_name", ColumnType::kText},
    {"tool_args", ColumnType::kText},    // JSON text; "" when none
    {"chain_seq", ColumnType::kInt},     // the record's place in its instance's chain (0: none)
    {"chain_key", ColumnType::kText},    // id of the key its chain_hash was made with
    {"chain_hash", ColumnType::kText},   // HMAC-SHA256 over the previous hash and the fields
    {"request_id", ColumnType::kText},   // an MCP call's JSON-RPC id as JSON text
    {"traceparent", ColumnType::kText},  // its W3C traceparent, when sent
    {"host", ColumnType::kText},         // "primary", a replica's host:port; "" reached none
    {"record_uid", ColumnType::kUid},    // last: the jsonl store finds it at the end of a line
}};

// One column's value for a record. Text and JSON point into the record or into the RowValues
// that holds it (the `tables` JSON, record_uid, the timestamps' text).
struct Value {
  ColumnType type = ColumnType::kText;
  int64_t i = 0;             // kTimestamp (epoch microseconds), kInt; kBool as 0/1
  std::string_view text;     // kText, kJson, kUid (empty: NULL); kTimestamp as SQLite stores it
};

// The values of one record in kColumns order. Keeps the JSON it builds for `tables`, the text
// of record_uid and of the timestamps (formatted once, for the store and the chain alike);
// assign() reuses that storage, so a store that keeps one RowValues allocates nothing per record
// once it has seen the longest.
class RowValues {
 public:
  RowValues() = default;
  explicit RowValues(const Record& r) { assign(r); }
  RowValues(const RowValues&) = delete;
  RowValues& operator=(const RowValues&) = delete;
  void assign(const Record& r);
  const std::array<Value, kColumns.size()>& values() const { return values_; }
  // The chain fields (history/chain.h), set after assign(); `key_id` and `hash_hex` must outlive
  // the use of the values.
  void setChain(uint64_t seq, std::string_view key_id, std::string_view hash_hex);

 private:
  std::string tables_json_;
  std::array<char, 40> uid_{};  // 16 hex digits, '-', up to 20 decimal digits
  std::array<std::array<char, kTimestampChars>, 2> stamps_{};  // started_at, finished_at
  std::array<Value, kColumns.size()> values_;
};

enum class Dialect { kSqlite, kPostgres };

// Statements that create the schema if missing, or bring an older table up to date
// (idempotent), in order. For SQLite, which has no ADD COLUMN IF NOT EXISTS, the caller runs
// addColumn() for each of kAddedColumns between the first statement (the table) and the rest when
// the table lacks it, and then (schema version 5) moves a table's record_uid index to kSpoolTable.
std::vector<std::string> schemaStatements(Dialect dialect);
// Columns later schema versions added to an existing table, in order.
inline constexpr const char* kAddedColumns[] = {
    kUidColumn,      kWarningsColumn,  kToolNameColumn,  kToolArgsColumn,   kChainSeqColumn,
    kChainKeyColumn, kChainHashColumn, kRequestIdColumn, kTraceparentColumn, kHostColumn};
std::string addColumn(Dialect dialect, std::string_view name);
// For a reader of a SQLite store an older pgwarden wrote (the daemon adds what is missing when it
// opens the file; a reader opens it read-only): a TEMP view of the same name, which SQLite
// resolves before the table, adding each of kColumns absent from `present` with its default.
// "" when none is missing.
std::string sqliteOlderTableView(const std::vector<std::string>& present);

// "started_at, finished_at, ..." in kColumns order.
std::string columnList();

}  // namespace pgwarden::history
