// One query-history record: a statement and what became of it. Plain data, filled by the session
// and handed to a Recorder; nothing here knows about sockets or guards.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
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

// A record's fields over a text type and a list type. Record owns its strings. RecordView is
// the same record as views of the strings it is made of (the session's, the plan's, the run's):
// what the event loop hands over, so that the spool encodes it where it lands with no Record
// filled in between; every view must outlive the call it is passed to.
template <class Text, class List>
struct BasicRecord {
  int64_t started_at_us = 0;   // unix epoch microseconds
  int64_t finished_at_us = 0;
  int64_t duration_us = 0;
  Text instance_id;
  uint64_t session_id = 0;
  Text user;
  Text database;
  Text policy_group;
  Text client_addr;
  Text application_name;
  Text agent_id;
  Text conversation_id;
  Text query_intent_sent;
  Text query_intent_inferred;
  Text statement_kind;
  List tables;  // as written: "public.orders", or "orders" when unqualified
  Text sql_text;  // bounded by history.max_sql_bytes
  bool sql_truncated = false;
  // libpg_query fingerprint of this statement, 16 hex digits. Left empty, the writer thread
  // computes it from sql_text (e.g. for one statement of a multi-statement text).
  Text fingerprint;
  Text guard_actions;  // JSON list of {guard, action, code, reason}
  Outcome outcome = Outcome::kOk;
  Text deny_code;
  Text sqlstate;
  Text error_message;  // server error text, or for a denial the message sent to the client
  int64_t rows_returned = 0;
  bool truncated = false;      // row cap cut the result
  int64_t rows_affected = 0;
  int64_t bytes_sent = 0;
  Text protocol;  // "simple" or "extended"; "mcp" for the MCP endpoint
  // The result was exactly one row of one column whose value is zero (e.g. count(*) = 0): with
  // rows_returned == 0 this is what the `zeros` report calls a confident wrong answer.
  bool single_zero = false;
  // The result screens' codes for this result (UNKNOWN_VALUE, ...), in order; also in
  // guard_actions. Stored as the `warnings` count.
  List result_warnings;
  // The MCP tool the statement ran for ("" for SQL clients) and, for an operator-defined tool,
  // its validated arguments as one JSON object (the values bound to the statement's $n).
  Text tool_name;
  Text tool_args;
  // The request the statement ran for: an MCP call's JSON-RPC id as JSON text (`7`, `"a"`), and
  // its W3C traceparent when the caller sent one. "" for SQL clients.
  Text request_id;
  Text traceparent;
  // The upstream host the statement ran on: "primary", or a read replica's host:port as
  // upstream.replicas names it; "" when it reached no server (denied, or answered by pgwarden).
  Text host;
  // Set by the spool (history.durability: process) when the writer takes the record: the spool
  // file's random epoch and the record's sequence number in it. Together they are the record's
  // unique id in the store (record_uid), which makes writing it twice after a crash harmless.
  // Both 0 without a spool. Spool::push and pushView set them on what they were handed too, so
  // the caller (StatementRecorder) can name the record before the store has it.
  uint64_t spool_epoch = 0;
  uint64_t spool_seq = 0;
};

using Record = BasicRecord<std::string, std::vector<std::string>>;
using RecordView = BasicRecord<std::string_view, std::span<const std::string>>;

// `r` seen as a view (valid while `r` is unchanged).
RecordView viewOf(const Record& r);
// Every field of `r` set from `v`, its strings' storage reused.
void assignRecord(Record& r, const RecordView& v);

// Heap bytes a record holds beyond its own size (what keeping it for reuse keeps).
size_t heldBytes(const Record& r);

// record_uid as stored: the epoch as 16 hex digits, '-', the sequence number in decimal; "" for
// a record without a spool id.
std::string recordUid(const Record& r);
std::string recordUid(uint64_t spool_epoch, uint64_t spool_seq);
// The same text written to `buf` (at least 40 bytes) without allocating; "" without a spool id.
std::string_view formatRecordUid(const Record& r, char* buf, size_t size);
std::string_view formatRecordUid(uint64_t spool_epoch, uint64_t spool_seq, char* buf, size_t size);
// The inverse: false when `uid` is not one.
bool parseRecordUid(std::string_view uid, uint64_t* epoch, uint64_t* seq);

}  // namespace pgwarden::history
