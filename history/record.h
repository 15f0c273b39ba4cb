// One query-history record: a statement and what became of it. Plain data, filled by the session
// and handed to a Recorder; nothing here knows about sockets or guards.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/outcome.h"

namespace pgwarden::history {

// How a statement ended (common/outcome.h): one type for history, counters and metrics.
using pgwarden::Outcome;
using pgwarden::outcomeName;
using pgwarden::parseOutcome;

// Wall-clock microseconds since the Unix epoch: the clock of a record's started_at/finished_at.
inline int64_t wallClockMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Record {
  int64_t started_at_us = 0;   // unix epoch microseconds
  int64_t finished_at_us = 0;
  int64_t duration_us = 0;
  std::string instance_id;
  uint64_t session_id = 0;
  std::string user;
  std::string database;
  std::string policy_group;
  std::string client_addr;
  std::string application_name;
  std::string agent_id;
  std::string conversation_id;
  std::string query_intent_sent;
  std::string query_intent_inferred;
  std::string statement_kind;
  std::vector<std::string> tables;  // as written: "public.orders", or "orders" when unqualified
  std::string sql_text;        // bounded by history.max_sql_bytes
  bool sql_truncated = false;
  // libpg_query fingerprint of this statement, 16 hex digits. Left empty, the writer thread
  // computes it from sql_text (e.g. for one statement of a multi-statement text).
  std::string fingerprint;
  std::string guard_actions;   // JSON list of {guard, action, code, reason}
  Outcome outcome = Outcome::kOk;
  std::string deny_code;
  std::string sqlstate;
  std::string error_message;   // server error text, or for a denial the message sent to the client
  int64_t rows_returned = 0;
  bool truncated = false;      // row cap cut the result
  int64_t rows_affected = 0;
  int64_t bytes_sent = 0;
  std::string protocol;        // "simple" or "extended"; "mcp" for the MCP endpoint
  // The result was exactly one row of one column whose value is zero (e.g. count(*) = 0): with
  // rows_returned == 0 this is what the `zeros` report calls a confident wrong answer.
  bool single_zero = false;
  // The result screens' codes for this result (UNKNOWN_VALUE, ...), in order; also in
  // guard_actions. Stored as the `warnings` count.
  std::vector<std::string> result_warnings;
  // The MCP tool the statement ran for ("" for SQL clients) and, for an operator-defined tool,
  // its validated arguments as one JSON object (the values bound to the statement's $n).
  std::string tool_name;
  std::string tool_args;
  // The request the statement ran for: an MCP call's JSON-RPC id as JSON text (`7`, `"a"`), and
  // its W3C traceparent when the caller sent one. "" for SQL clients.
  std::string request_id;
  std::string traceparent;
  // The upstream host the statement ran on: "primary", or a read replica's host:port as
  // upstream.replicas names it; "" when it reached no server (denied, or answered by pgwarden).
  std::string host;
  // Set by the spool (history.durability: process) when the writer takes the record: the spool
  // file's random epoch and the record's sequence number in it. Together they are the record's
  // unique id in the store (record_uid), which makes writing it twice after a crash harmless.
  // Both 0 without a spool. Spool::push sets them on the record it was handed too, so the
  // caller that keeps the record (StatementRecorder) can name it before the store has it.
  uint64_t spool_epoch = 0;
  uint64_t spool_seq = 0;
};

// Heap bytes a record holds beyond its own size (what keeping it for reuse keeps).
size_t heldBytes(const Record& r);
// `r` as a default-constructed Record, its strings' and lists' storage kept: for code that fills
// one record after another.
void clearRecord(Record& r);

// record_uid as stored: the epoch as 16 hex digits, '-', the sequence number in decimal; "" for
// a record without a spool id.
std::string recordUid(const Record& r);
// The same text written to `buf` (at least 40 bytes) without allocating; "" without a spool id.
std::string_view formatRecordUid(const Record& r, char* buf, size_t size);
// The inverse: false when `uid` is not one.
bool parseRecordUid(std::string_view uid, uint64_t* epoch, uint64_t* seq);

}  // namespace pgwarden::history
