// The statement recorder: the one place a finished statement becomes what pgwarden remembers of
// it. Every front end (the wire protocol today, the MCP endpoint next) hands its finished runs
// here, so each statement gets exactly one history record, is counted once in the counters and
// metrics, and gives back what it held of its conversation's budget.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "budgets/budget.h"
#include "guards/agent_context.h"
#include "guards/policy.h"
#include "history/record.h"
#include "screens/probe.h"
#include "session/statement_policy.h"

namespace pgwarden::session {

// A Bind's parameter values as the result screens read them: text format, $1 first; nullopt for
// NULL or a binary value.
using ScreenParams = std::vector<std::optional<std::string>>;

// One statement's life, from the message that started it to its record. Shared by whatever
// tracks it (a pending server answer, a portal); finished (and recorded) exactly once.
struct StatementRun {
  std::shared_ptr<const StatementPlan> plan;
  size_t index = 0;            // which statement of the plan's text
  bool extended = false;
  int64_t started_us = 0;
  int64_t rows_sent = 0;       // DataRows the client received
  int64_t rows_affected = 0;
  int64_t txn_rows = -1;       // COMMIT/ROLLBACK in a guarded write transaction: its rows changed
  int64_t bytes_sent = 0;
  int64_t max_rows = -1;       // the cap, -1 none
  bool truncated = false;      // rows were held back by the cap
  bool notice_sent = false;
  bool finished = false;
  bool single_zero = false;
  bool single_null = false;      // the first row is one NULL column (result screens)
  int64_t first_value_rows = 0;  // rows seen while checking single_zero
  // The Bind's parameter values, kept only when a result screen may need them.
  std::shared_ptr<const ScreenParams> params;
  // Result values that broke the group's result_assertions (ASSERTION_FAILED).
  guards::AssertionFailures assertion_failures;
  // What the result screens said about the result (history's guard_actions, metrics).
  std::vector<guards::Verdict> screens;
  // The screens' indexed probe of an empty read (screens/probe.h), null when none was asked:
  // at most one per statement. Shared with the probe while it runs.
  std::shared_ptr<screens::ProbeAnswer> probe;
  // Admitted by a budget: its rows are counted and its running slot released when it finishes.
  std::shared_ptr<const budgets::BudgetKey> budget_key;
  // The statement's sqlcommenter overrides: its record carries the agent context it ran with.
  guards::AgentOverrides overrides;
  // The upstream host it was sent to (history's host, Pool::hostLabel: held for the process's
  // life); empty while it reached no server.
  std::string_view host;
  // Entries of the session's queue of server answers that hold this run (QueuedRun keeps it):
  // whether the server still owes it something, without scanning the queue.
  uint32_t queued = 0;
};

// A run as an entry of a session's queue of server answers holds it: counted in the run's
// `queued`, so a pipeline of any length asks "is this run still awaited?" in constant time.
class QueuedRun {
 public:
  QueuedRun() = default;
  QueuedRun(std::shared_ptr<StatementRun> run) : run_(std::move(run)) { hold(); }  // NOLINT
  QueuedRun(const QueuedRun& o) : run_(o.run_) { hold(); }
  QueuedRun(QueuedRun&& o) noexcept : run_(std::move(o.run_)) {}
  QueuedRun& operator=(QueuedRun o) noexcept {
    drop();
    run_ = std::move(o.run_);
    return *this;
  }
  ~QueuedRun() { drop(); }

  void reset() {
    drop();
    run_.reset();
  }
  StatementRun* get() const { return run_.get(); }
  StatementRun* operator->() const { return run_.get(); }
  StatementRun& operator*() const { return *run_; }
  explicit operator bool() const { return static_cast<bool>(run_); }
  const std::shared_ptr<StatementRun>& shared() const { return run_; }
  long use_count() const { return run_.use_count(); }  // NOLINT(google-runtime-int)

 private:
  void hold() {
    if (run_) ++run_->queued;
  }
  void drop() {
    if (run_ && run_->queued > 0) --run_->queued;
  }
  std::shared_ptr<StatementRun> run_;
};

// A new run of statement `index` of `plan`, started now, with the plan's row cap.
std::shared_ptr<StatementRun> startRun(std::shared_ptr<const StatementPlan> plan, size_t index,
                                       bool extended);

// What an error's SQLSTATE makes of a statement: cancelled (57014) or error.
history::Outcome outcomeForError(std::string_view sqlstate);

// Where finished statements go: the process counts them, exports their metrics and queues
// their history records (never blocking).
class StatementSink {
 public:
  virtual ~StatementSink() = default;
  // `record`'s views hold only during the call; a sink that keeps it copies it
  // (history::assignRecord).
  virtual void onStatement(history::RecordView& record, const StatementPlan* plan) = 0;
};

class StatementRecorder {
 public:
  // `budgets` may be null (no budget state: nothing to give back).
  StatementRecorder(StatementSink& sink, budgets::BudgetLedger* budgets,
                    std::string_view instance_id)
      : sink_(sink), budgets_(budgets), instance_id_(instance_id) {}

  // Records `run` once (later calls do nothing): its history record, counters and metrics, and
  // its budget's rows and running slot. `who` is the caller as the statement saw it (its
  // comment overrides applied); `policy` the caller's group (null: none).
  void finish(StatementRun& run, const guards::RequestContext& who, const guards::PolicyGroup* policy,
              history::Outcome outcome, std::string_view sqlstate = {}, std::string_view message = {});

  // A denied text: one record per statement it holds, and, unless a budget denied it, the
  // conversation's max_denied counts as many statements as the text spends.
  void denied(const StatementPlan& plan, const guards::RequestContext& who,
              const guards::PolicyGroup* policy, const guards::AgentOverrides& overrides);

  budgets::BudgetLedger* budgets() const { return budgets_; }
  // The ledger is gone (shutdown): nothing more is given back.
  void setBudgets(budgets::BudgetLedger* budgets) { budgets_ = budgets; }

 private:
  // What finish() composes for a record (the rest are views of the run, the plan and the
  // caller), kept with its storage up to kKeepScratchBytes for the next.
  static constexpr size_t kKeepScratchBytes = 64 * 1024;

  StatementSink& sink_;
  budgets::BudgetLedger* budgets_;
  std::string instance_id_;
  std::string actions_;   // guard_actions with the screens' findings
  std::string message_;   // an error message with its quoted parts taken out
  std::vector<std::string> warnings_;  // the screens' codes
};

}  // namespace pgwarden::session
