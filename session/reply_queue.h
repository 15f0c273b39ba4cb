// What the server still owes a client session, in order, and the state of the extended-protocol
// batch those answers belong to: an entry per message forwarded (or per answer of pgwarden's own
// waiting for its turn), whether a batch is open (sent since the last Sync), and whether the rest
// of the batch is skipped up to its Sync after a denial or a server error, as PostgreSQL skips it.
// The session changes these only through the methods below, so "what is owed" and "is the batch
// skipped" each have one answer.
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "common/ring_queue.h"
#include "pool/server_statements.h"
#include "protocol/message_types.h"
#include "session/skipped_batch.h"
#include "session/statement_execution.h"
#include "session/statement_policy.h"
#include "session/statement_recorder.h"

namespace pgwarden::session {

class ReplyQueue {
 public:
  // What the server still owes for a message we forwarded, in order, or an answer of our own
  // waiting for its turn (kLocal).
  enum class Expect : uint8_t {
    kParse,
    kBind,
    kDescribeStatement,
    kDescribePortal,
    kExecute,
    kClose,
    kSync,
    kQuery,
    kInternal,  // pgwarden's own Query (SET on attach); its responses are swallowed
    kLocal,     // bytes of our own to send when this reaches the head
    kExplain,   // the cost gate's EXPLAIN: its plan is read here, never forwarded
    // Transaction pooling: pgwarden's own Parse of a client's statement on this connection, and
    // its Close of the connection's least recently used one; their answers are swallowed.
    kInternalParse,
    kInternalClose,
  };
  // Guarded writes: pgwarden's own statements around a client's write (kInternal entries).
  // kCount: the transaction's per-table counters read after the write (WriteTransaction).
  enum class WriteStep : uint8_t { kNone, kSavepoint, kCount, kRelease, kUndo, kExpire };
  // One entry of the queue. What every kind needs is in the entry itself; what one kind needs
  // is in its alternative of `data` (chosen by the constructor from the kind, and only changed
  // with it), so a deep pipeline costs a small entry per message.
  struct Pending {
    // A client's write under guarded writes (kQuery, kExecute). The target is behind a pointer:
    // most statements are not such writes.
    struct WriteTarget {
      std::string table;  // for the tallies
      std::string command;
    };
    struct Write {
      std::unique_ptr<const WriteTarget> target;  // set: a counted write inside the savepoint
      bool undo = false;                          // over a cap; roll back to the savepoint
      bool failed = false;                        // kQuery: the server refused it
    };
    // kParse; kInternalParse uses server_text only.
    struct Statement {
      std::string name;
      std::shared_ptr<const StatementPlan> previous;  // what the name meant before
      bool had_previous = false;
      // Transaction pooling: the text prepared on the connection, which it forgets again if the
      // Parse fails.
      std::shared_ptr<const pool::PreparedText> server_text;
    };
    struct Bind {
      std::shared_ptr<const StatementPlan> plan;
      std::string name;  // the portal
    };
    struct DescribeStatement {
      bool described = false;  // ParameterDescription seen
    };
    struct DescribePortal {
      bool ours = false;  // pgwarden's own before an Execute: masked columns (docs/masking.md)
    };
    struct Execute {
      Write write;
    };
    struct Query {
      // The text's statements as the server answers them (shared with the MCP door).
      std::unique_ptr<TextExecution> exec;
      Write write;
    };
    struct Local {
      std::string bytes;
      bool rfq = false;  // append ReadyForQuery (simple protocol)
    };
    // The strings stay inline: this is no larger than Statement, so they cost the entry nothing.
    struct Explain {
      bool simple = false;       // sent as a Query, or ended by a Sync (else Parse/Bind/... Flush)
      bool parse_check = false;  // the gate's parse check (a Parse and Close), not an EXPLAIN
      int closes = 0;            // extended: CloseComplete still due
      std::string json;          // the one value EXPLAIN returned
      std::string error;         // the server's ErrorResponse, if any
    };
    struct Internal {
      WriteStep write_step = WriteStep::kNone;  // a step of the write mode
      bool param_sync = false;                  // the carried settings brought in line (not attach)
      bool failed = false;     // the step's (or carried setting's) statement was refused
      std::string error;       // ... a carried setting's: the server's sqlstate \x1f message
      int step_closes = 0;     // a write step sent as Parse/Bind/Execute: Closes still due
      bool abort_txn = false;  // after a denial: the Sync or statement that fails the server's
                               // transaction block as the denied statement would have
      bool sync = false;       // a Sync of pgwarden's own (it ends an extended batch)
    };
    // kSync, kClose and kInternalClose carry nothing (std::monostate).
    using Data = std::variant<std::monostate, Statement, Bind, DescribeStatement, DescribePortal,
                              Execute, Query, Local, Explain, Internal>;

    explicit Pending(Expect k);
    Expect kind;
    QueuedRun run;                  // kExecute (a Query's runs are its TextExecution's)
    int64_t rows_this_execute = 0;  // kExecute/kQuery: rows sent for this message
    Data data;

    Statement& statement() { return as<Statement>(); }
    const Statement& statement() const { return as<Statement>(); }
    Bind& bind() { return as<Bind>(); }
    DescribeStatement& describeStatement() { return as<DescribeStatement>(); }
    DescribePortal& describePortal() { return as<DescribePortal>(); }
    Execute& execute() { return as<Execute>(); }
    Query& query() { return as<Query>(); }
    const Query& query() const { return as<Query>(); }
    Local& local() { return as<Local>(); }
    Explain& explain() { return as<Explain>(); }
    const Explain& explain() const { return as<Explain>(); }
    Internal& internal() { return as<Internal>(); }
    const Internal& internal() const { return as<Internal>(); }
    // The guarded-write state of a kQuery or kExecute; null for the other kinds.
    Write* write();
    // The run the server's next answers belong to: an Execute's, or the Query statement's.
    StatementRun* current() const {
      const auto* q = std::get_if<Query>(&data);
      if (q) return q->exec ? q->exec->run() : nullptr;
      return run.get();
    }
    std::shared_ptr<StatementRun> currentShared() const {
      const auto* q = std::get_if<Query>(&data);
      if (q) return q->exec ? q->exec->shared() : nullptr;
      return run.shared();
    }
    // kNone unless this is pgwarden's own write step (kInternal).
    WriteStep writeStep() const {
      const auto* i = std::get_if<Internal>(&data);
      return i ? i->write_step : WriteStep::kNone;
    }
    // This entry's answer becomes bytes of pgwarden's own, sent in its turn.
    void answerHere(std::string bytes) {
      kind = Expect::kLocal;
      data = Local{std::move(bytes), false};
    }

   private:
    // The kind names the alternative; asking for another is a bug in the caller.
    template <class T>
    T& as() {
      T* t = std::get_if<T>(&data);
      assert(t);
      return *t;
    }
    template <class T>
    const T& as() const {
      const T* t = std::get_if<T>(&data);
      assert(t);
      return *t;
    }
  };
  // Measured with GCC 12 / libstdc++ on x86-64 (the entry was 440 bytes as one struct): a
  // growing alternative shows here rather than as memory under a deep pipeline.
  static_assert(sizeof(Pending) <= 112, "a pending entry grew");

  // Beyond this many entries the session stops reading its client (backpressure).
  static constexpr size_t kMaxEntries = 65536;

  // The queue, oldest first: the head is what the server's next message answers.
  bool empty() const { return pending_.empty(); }
  size_t size() const { return pending_.size(); }
  bool full() const { return pending_.size() > kMaxEntries; }
  Pending& front() { return pending_.front(); }
  const Pending& front() const { return pending_.front(); }
  Pending& back() { return pending_.back(); }
  auto begin() { return pending_.begin(); }
  auto end() { return pending_.end(); }
  auto begin() const { return pending_.begin(); }
  auto end() const { return pending_.end(); }
  void push(Pending&& p) { pending_.push_back(std::move(p)); }
  // An answer the server owes before everything queued (the carried settings' sync, sent as the
  // connection is taken).
  void pushFront(Pending&& p) { pending_.push_front(std::move(p)); }
  // Before the message just queued (pgwarden's own Parse or Close sent ahead of it).
  void insertBeforeLast(Pending p);
  // The head is answered (nothing happens when the queue is empty).
  void pop();
  // The session ends or its statements were all accounted for: every entry goes.
  void clear() { pending_.clear(); }
  // An idle session gives its ring back.
  void release() { pending_.release(); }

  // Answers of pgwarden's own: `bytes` (and a ReadyForQuery with `tx_status` when `rfq`) go to
  // `out` now when the server owes nothing, else wait for their turn. True: queued.
  bool answerLocal(std::string bytes, bool rfq, char tx_status, std::string& out);
  // The message just queued is answered here instead (its answer `bytes`, in its turn).
  void answerLastHere(std::string bytes, char tx_status, std::string& out);
  // The answers of pgwarden's own at the head, sent now (in order), up to the next entry the
  // server owes.
  void emitLocalHeads(char tx_status, std::string& out);
  // pop(), then emitLocalHeads().
  void popAndEmit(char tx_status, std::string& out);

  // ReadyForQuery messages the server still owes.
  int rfqOwed() const;
  // A Query waits behind extended-protocol messages not yet synced: whether the server answers
  // it depends on whether they fail.
  bool owedIsUncertain() const;
  // The server waits for a Sync: the last message it was sent opened a batch, or it is skipping.
  bool unsyncedTail() const;
  // A statement (an Execute, a Query, the cost gate's EXPLAIN) is running on the server.
  bool running() const;

  // The extended-protocol batch: open from the first message that opens one to its Sync.
  bool unsynced() const { return unsynced_; }
  void batchMessage(protocol::Batch b);
  void batchOpened() { unsynced_ = true; }
  void batchClosed() { unsynced_ = false; }
  // Read-only groups: an Execute of COMMIT or ROLLBACK was sent in this batch
  // (client_session_agent.cpp).
  bool txnEndInBatch() const { return txn_end_in_batch_; }
  void txnEndSent() { txn_end_in_batch_ = true; }
  // The client's Sync: the batch ends for the read-only check whether or not a server hears it.
  void syncReceived() { txn_end_in_batch_ = false; }

  // Skipping to Sync. Why the rest of a batch is skipped: pgwarden refused a message (a guard's
  // denial, or an error of its own), or the server reported an error (it skips too, so the
  // server still waits for a Sync: unsyncedTail()).
  enum class SkipCause : uint8_t { kDenied, kRefused, kServerError };
  // Starts skipping (the skipped names are forgotten; at most `max_names` are remembered).
  // `abort_at_sync`: the denial left a transaction block that must fail at that Sync.
  // Returns the tracker for the names the failed message stands for.
  SkippedBatch& skipToSync(SkipCause cause, std::string_view sqlstate, size_t max_names,
                           bool abort_at_sync = false);
  bool skipping() const { return deny_skipping_ || server_skipping_; }
  // The Sync that ends the skip arrived: skipping stops. True: the transaction block must be
  // failed first (abort_at_sync).
  [[nodiscard]] bool endSkip();
  // What the skipped messages name, while skipping().
  SkippedBatch& skipped() { return skipped_; }
  const SkippedBatch& skipped() const { return skipped_; }

 private:
  RingQueue<Pending> pending_;
  bool deny_skipping_ = false;     // we refused a Parse/Bind: drop client messages until Sync
  bool abort_at_sync_ = false;     // ... inside a transaction block: fail it at that Sync
  bool server_skipping_ = false;   // the server reported an error: it ignores messages until Sync
  SkippedBatch skipped_;           // what the skipped messages name, while either flag is set
  bool unsynced_ = false;          // extended-protocol messages sent since the last Sync
  bool txn_end_in_batch_ = false;  // an Execute of COMMIT or ROLLBACK sent since the last Sync
};

}  // namespace pgwarden::session
