// The guarded-writes state machine of one conversation (docs/writes.md): which statements a
// `mode: guarded_writes` group may run given what the session has read and whether a transaction
// is open, the row caps on what its writes changed, and the notices that tell the agent its next
// moves. Pure: no sockets, no clock of its own; the wire session (and the MCP endpoint) feed it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "guards/guard.h"
#include "guards/policy.h"

namespace pgwarden::session {

// pgwarden's own savepoint around each write; a client statement naming it is refused.
inline constexpr std::string_view kWriteSavepoint = "pgwarden_w";

enum class TxnState : uint8_t {
  kNone,        // no transaction open on the server
  kOpen,        // inside BEGIN (ReadyForQuery 'T')
  kFailed,      // a statement failed inside it (ReadyForQuery 'E'): only ROLLBACK helps
  kRolledBack,  // pgwarden rolled it back (idle or too old); the next statement hears so
};
const char* txnStateName(TxnState s);

enum class TxnEvent : uint8_t {
  kServerIdle,    // ReadyForQuery 'I'
  kServerInTxn,   // ReadyForQuery 'T'
  kServerFailed,  // ReadyForQuery 'E'
  kExpired,       // pgwarden sends ROLLBACK: idle or older than allowed
  kTold,          // the client got TRANSACTION_ROLLED_BACK
};

// How a transaction ended, for metrics and history ("committed", "rolled_back", ...).
enum class TxnEnd : uint8_t { kCommitted, kRolledBack, kIdleTimeout, kMaxAge, kDisconnect };
const char* txnEndName(TxnEnd e);

class WriteTransaction {
 public:
  explicit WriteTransaction(const guards::WriteMode& mode) : mode_(mode) {}

  TxnState state() const { return state_; }
  // The one transition function. False (and no change) when `e` is not a legal move from the
  // current state. `now_ms` stamps a new transaction's start and every statement's end.
  bool move(TxnEvent e, uint64_t now_ms);

  // What a text may do before it runs. `deny` set: answer with it (and, for
  // TRANSACTION_ROLLED_BACK, move(kTold) once sent). `wrap`: a counted write, to run inside
  // pgwarden's savepoint; `table` names its target.
  struct Judgement {
    std::optional<guards::GuardResult> deny;
    bool wrap = false;
    std::string table;
    std::string command;
    bool at_execute = false;  // extended: judgeExecute before each Execute
  };
  // `extended`: a Parse; TRANSACTION_REQUIRED and LOOK_FIRST wait for judgeExecute.
  Judgement judge(const guards::GuardInput& in, bool extended) const;
  // An Execute of a write prepared over the extended protocol, when it is to run: the denial
  // (TRANSACTION_ROLLED_BACK, TRANSACTION_REQUIRED, LOOK_FIRST) or nullopt. `begin_sent`: a
  // BEGIN earlier in the same batch is on its way to the server.
  std::optional<guards::GuardResult> judgeExecute(const analysis::StatementInfo& st,
                                                  bool begin_sent) const;

  // A read that succeeded: its tables count as looked at (bounded; the oldest is forgotten).
  void noteRead(const analysis::StatementInfo& st);
  bool looked(std::string_view schema, std::string_view name) const;

  // What a wrapped write really changed: the command tag counts only the named table, so the
  // transaction's per-table counters (pg_stat_xact_user_tables, which include rows changed by
  // ON DELETE CASCADE, SET NULL and triggers) are read with pgwarden's SAVEPOINT and again after
  // the write; the difference is what the statement changed. ROLLBACK TO does not rewind the
  // counters, so only such per-statement differences are used. Each row of either read goes to
  // noteCounterRow(), a DataRow's body; beginWrite() starts the count of a write to `table`. The
  // counters are read only when the table can change others (a cascading foreign key, a trigger,
  // a rule; the query checks the catalog): a plain table's writes are counted by their tag.
  std::string countersQuery() const;
  void beginWrite(std::string_view table);
  // pgwarden's savepoint steps around a wrapped write, the same on every door: set it with the
  // counters the write's count starts from (kSet: after beginWrite), keep the write (kRelease),
  // or undo it (kUndo: ROLLBACK TO, then RELEASE). Each step is a list of statements: a simple
  // Query sends them joined (savepointQuery), an extended batch one Parse/Bind/Execute each.
  enum class Savepoint : uint8_t { kSet, kRelease, kUndo };
  std::vector<std::string> savepointStatements(Savepoint step) const;
  std::string savepointQuery(Savepoint step) const;
  void noteCounterRow(std::string_view data_row_body);
  // A wrapped write's rows, `tag_rows` from its command tag and the per-table changes from the
  // counters (the larger total counts). The TOO_MANY_ROWS denial when it is over the statement
  // or transaction cap (the caller rolls back to the savepoint); otherwise the rows count
  // towards the transaction.
  struct TableDelta {
    std::string table;
    int64_t rows = 0;
  };
  std::optional<guards::GuardResult> onWriteDone(const std::string& table, std::string_view command,
                                                 int64_t tag_rows,
                                                 const std::vector<TableDelta>& changed = {});
  // DDL that ran inside the transaction (no rows, but part of what COMMIT keeps).
  void onDdlDone(std::string_view command);

  // What every front end does at a statement's CommandComplete: `st` is the statement (null: not
  // known), `tag` its command tag, `wrapped` set when it is a write under pgwarden's savepoint
  // (its target table and command). A SELECT's tables count as looked at, DDL inside the
  // transaction is noted, a wrapped write's rows go through onWriteDone().
  struct Completion {
    int64_t txn_rows = -1;  // a COMMIT or ROLLBACK of this transaction: its rows, for history
    int64_t rows = 0;       // the rows the wrapped write changed (all tables)
    bool counted = false;   // ... and they were kept (within the caps)
    std::optional<guards::GuardResult> over;  // ... or TOO_MANY_ROWS: undo the statement
    // The write can have changed other tables and its tag alone is within the caps: read the
    // counters again (countersQuery(), each row to noteCounterRow()) and settle with onCounted()
    // before the savepoint is released.
    bool measure = false;
  };
  struct Wrapped {
    const std::string& table;
    std::string_view command;
  };
  Completion onCommandComplete(const analysis::StatementInfo* st, std::string_view tag,
                               std::optional<Wrapped> wrapped);
  // The counters after the write are in: its rows across every table it changed, counted or
  // over a cap (as onCommandComplete's answer).
  Completion onCounted();
  // A statement ended with the server's ReadyForQuery `status` ('I', 'T' or 'E'), its last
  // command tag's first word `last_tag`: the state moves, and the agent hears TRANSACTION_OPEN
  // inside the transaction, or TRANSACTION_COMMITTED / DISCARDED when it ended (the tallies are
  // then cleared). `moved` false: no legal move, nothing changed.
  struct StatementEnd {
    bool moved = false;
    std::optional<TxnEnd> ended;  // kCommitted or kRolledBack
    std::optional<guards::Verdict> notice;
  };
  StatementEnd afterStatement(char status, std::string_view last_tag, uint64_t now_ms);
  // A text the gate denied with `code` (it never ran): a TRANSACTION_ROLLED_BACK denial marks the
  // loss as told; inside a transaction the agent hears TRANSACTION_OPEN (it is as it was).
  std::optional<guards::Verdict> afterDenial(std::string_view code, uint64_t now_ms);

  // pgwarden must roll back now (idle or too old), given the last statement's end; nullopt: not due.
  std::optional<TxnEnd> due(uint64_t now_ms) const;
  // The transaction ended (committed, rolled back by the client, expired, disconnected): its
  // totals, for the record and metrics, and the tallies cleared.
  struct Totals {
    int64_t rows = 0;
    int64_t writes = 0;
    std::string summary;  // "public.t: 4 rows; CREATE TABLE"
  };
  Totals totals() const;
  void clear();

  // Notices (severity NOTICE): after each statement inside the transaction, and the answer to
  // COMMIT or ROLLBACK.
  guards::Verdict openNotice(uint64_t now_ms) const;
  guards::Verdict endNotice(bool committed) const;
  // The denial of the statement after pgwarden rolled back: what was lost and why.
  guards::GuardResult rolledBackDenial() const;
  TxnEnd expiredBy() const { return expired_by_; }

 private:
  struct TableRows {
    std::string table;
    int64_t rows = 0;
  };
  struct Change {
    std::string command;
    std::string table;
    int64_t rows = 0;
  };
  // The tallies as they were when the client set a savepoint, restored by ROLLBACK TO it.
  struct Mark {
    std::string name;
    int64_t rows = 0;
    int64_t writes = 0;
    std::vector<TableRows> tables;
    std::vector<Change> changes;
  };
  // The wrapped write being counted: its tag's rows, the counters before and after it.
  struct Counting {
    std::string table;
    std::string command;
    int64_t tag_rows = 0;
    bool needed = false;  // the target can change other tables (the query's first row)
    bool after = false;
    std::vector<TableDelta> before;  // bounded by kMaxCounted (the query's LIMIT)
    std::vector<TableDelta> now;
  };
  void onSavepointStatement(const analysis::StatementInfo& st);
  std::vector<TableDelta> counted() const;
  static std::string key(std::string_view schema, std::string_view name);
  std::string summary() const;
  std::optional<guards::GuardResult> stateDenial(const analysis::StatementInfo& st,
                                                 const std::string& target,
                                                 bool no_transaction) const;
  std::optional<guards::GuardResult> judgeStatement(const guards::GuardInput& in,
                                                    const analysis::StatementInfo& st,
                                                    bool extended, Judgement& j) const;

  const guards::WriteMode& mode_;
  TxnState state_ = TxnState::kNone;
  uint64_t began_ms_ = 0;
  uint64_t last_ms_ = 0;
  int64_t rows_ = 0;
  int64_t writes_ = 0;
  std::vector<TableRows> tables_;     // bounded by kMaxTables
  std::vector<Change> changes_;       // bounded by kMaxChanges (the rest only counted)
  std::vector<std::string> looked_;   // bounded by kMaxLooked, oldest first
  std::vector<Mark> marks_;           // the client's savepoints, bounded by kMaxMarks
  Counting counting_;
  // What pgwarden's rollback lost, kept until the client is told.
  TxnEnd expired_by_ = TxnEnd::kIdleTimeout;
  std::string lost_;
  int64_t lost_rows_ = 0;
};

}  // namespace pgwarden::session
