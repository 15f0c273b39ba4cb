// What happens to a statement once the gate has judged it, whichever door it came through (the
// wire protocol's ClientSession, the MCP endpoint's StatementRunner): the wait for the first
// catalog statistics before judging, the row cap's count of the server's DataRows, what a
// CommandComplete says of the rows a statement changed, the result screens with their one rule
// for when a finding denies, each statement's record, and the records of the statements of a
// text that never ran. Each door calls these; none keeps its own copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/recycling_allocator.h"
#include "guards/agent_context.h"
#include "guards/policy.h"
#include "history/record.h"
#include "protocol/messages.h"
#include "session/result_screen.h"
#include "session/statement_recorder.h"

namespace pgwarden::pool {
class ServerConnection;
}  // namespace pgwarden::pool

namespace pgwarden::session {

// How long a statement (or a login) waits for the first catalog statistics of its database, so
// the first statements are judged with table sizes known; past it, it goes on without them.
inline constexpr uint64_t kStatsWaitMs = 3000;

// The one statistics wait both doors hold while the first load runs.
class StatsWait {
 public:
  void begin(uint64_t now_ms) { until_ms_ = now_ms + kStatsWaitMs; }
  bool waiting() const { return until_ms_ != 0; }
  // True once, when the wait ends: the statistics are in (`loaded`) or its time is up.
  [[nodiscard]] bool over(uint64_t now_ms, bool loaded);
  void stop() { until_ms_ = 0; }

 private:
  uint64_t until_ms_ = 0;
};

// The record text of a statement that never ran because one before it failed: in the same
// simple Query (or MCP call's text), or in the same extended-protocol batch.
inline constexpr std::string_view kNotExecutedInQuery =
    "not executed: an earlier statement in the same query failed";
inline constexpr std::string_view kNotExecutedInBatch =
    "not executed: an earlier message in the same batch failed";

// Records each statement of `plan` from `next` on as not run (advancing `next` past them):
// `finish(run)` is the door's own finish, which knows who asked.
template <typename Finish>
void finishNotExecuted(const std::shared_ptr<const StatementPlan>& plan, size_t& next,
                       const guards::AgentOverrides& overrides, Finish&& finish) {
  while (plan && next < plan->statements.size()) {
    auto run = startRun(plan, next++, false);
    run->overrides = overrides;
    finish(*run);
  }
}

// What the result screens found in a finished run: the warnings to pass on and the denial that
// answers the statement instead of its CommandComplete. A finding set to deny denies only where
// the caller expects nothing more of the statement (the last statement of a simple Query, or of
// an MCP call's text: `may_deny`); elsewhere it is one more warning.
struct ScreenFindings {
  std::vector<const guards::Verdict*> warnings;
  const guards::Verdict* denial = nullptr;
};
// `stats()` is called only when a screen may speak (the catalog snapshot it reads).
template <typename Stats>
ScreenFindings screenFindings(StatementRun& run, const guards::PolicyGroup* policy, Stats&& stats,
                              bool may_deny) {
  ScreenFindings out;
  if (!screenMaySpeak(run)) return out;
  const auto snapshot = stats();
  const auto& found = screenRun(run, policy, snapshot.get());
  out.denial = may_deny ? screenDenial(run) : nullptr;
  for (const auto& v : found) {
    if (&v != out.denial) out.warnings.push_back(&v);
  }
  return out;
}

class ScreenProbe;

// Before a finished read's CommandComplete is answered, whichever door: when the screens would
// ask their indexed probe (result_screen.h screenProbe), it starts on `probe` against
// `server_db` and `server`'s input is held, so that this CommandComplete is handed over again
// once the probe has answered or given up (its time budget, the group's screen_probe_timeout,
// bounds the wait): `resume` is called then and must release the door's server connection's
// input, if the door still has it. True when held: the door answers nothing now. The second
// hand-over goes on: one probe per statement. Call it where probeWanted() holds.
bool holdForProbe(StatementRun& run, const guards::PolicyGroup* policy,
                  const analysis::TableStatsSnapshot* stats, ScreenProbe& probe,
                  const std::string& server_db, pool::ServerConnection& server,
                  std::function<void()> resume);
// Whether holdForProbe() could hold `run`'s reply at all: its group probes, it asked nothing
// yet, and nothing came back (a few compares: a door looks up nothing for nearly every
// statement).
inline bool probeWanted(const StatementRun& run, const guards::PolicyGroup* policy) {
  if (!policy || policy->settings().screen_probe_ms <= 0 || run.probe || !run.screens.empty() ||
      run.truncated)
    return false;
  if (run.rows_sent > 1) return false;  // the common case, before any lookup
  const auto* a = run.plan ? run.plan->analysis.get() : nullptr;
  return a && a->ok && run.index < a->statements.size() &&
         a->statements[run.index].kind == analysis::StatementKind::kSelect &&
         nothingMatchedYet(run);
}

// A DataRow of `run`'s result (the server's decoded message): false when the run already holds
// `cap` rows (-1: none), so the row is held back and the run marked truncated; otherwise it is
// counted (rows, bytes, and whether its one column is the single zero of an empty count).
[[nodiscard]] bool countDataRow(StatementRun& run, const protocol::Frame& f, int64_t cap);
// A CommandComplete of `run` with command tag `tag`: the rows a write changed (a guarded write
// transaction's COMMIT or ROLLBACK: the rows it kept or discarded) and the message's bytes.
void noteCommandComplete(StatementRun& run, std::string_view tag, size_t bytes);

// Where a door's finished runs go: its call into the StatementRecorder, with who asked.
class RunSink {
 public:
  virtual void finishRun(StatementRun& run, history::Outcome outcome, std::string_view sqlstate,
                         std::string_view message) = 0;

 protected:
  ~RunSink() = default;
};

// One judged text's statements as the server answers them, in order: the run of the statement
// being answered (started from the gate's plan, holding the budget the text was admitted to),
// its end in the door's RunSink, and the next statement's run; an error ends the run and records
// the rest as not executed. The door feeds it the decoded events and decides what its caller
// sees; the execution never answers anyone itself.
class TextExecution {
 public:
  explicit TextExecution(RunSink& sink) : sink_(sink) {}
  TextExecution(const TextExecution&) = delete;
  TextExecution& operator=(const TextExecution&) = delete;
  // A Query makes one and drops it with its answer: from the loop's recycled blocks, so that
  // costs no malloc in the steady state.
  static void* operator new(size_t size) {
    if (size != sizeof(TextExecution)) return ::operator new(size);
    return RecyclingAllocator<TextExecution>{}.allocate(1);
  }
  static void operator delete(void* p, size_t size) noexcept {
    if (size != sizeof(TextExecution)) return ::operator delete(p);
    RecyclingAllocator<TextExecution>{}.deallocate(static_cast<TextExecution*>(p), 1);
  }

  // The gate's plan is about to run: the first statement's run starts (none for an empty text).
  // `params`: the bound values the screens compare (null: none).
  void begin(std::shared_ptr<const StatementPlan> plan, const guards::AgentOverrides& overrides,
             std::shared_ptr<const budgets::BudgetKey> budget, bool extended,
             std::shared_ptr<const ScreenParams> params);
  // Only the plan (a denial, the cost gate's failed EXPLAIN, an explain call): nothing runs.
  void judged(std::shared_ptr<const StatementPlan> plan, const guards::AgentOverrides& overrides);
  const std::shared_ptr<const StatementPlan>& plan() const { return plan_; }
  const guards::AgentOverrides& overrides() const { return overrides_; }
  StatementRun* run() const { return run_.get(); }
  const std::shared_ptr<StatementRun>& shared() const { return run_; }
  // The text was sent to the server on `host` (Pool::hostLabel, held for the process's life):
  // its statements' records name it, also those the server skipped after an error.
  void sentTo(std::string_view host) {
    host_ = host;
    if (run_) run_->host = host;
  }
  // The run being answered is the text's last statement: its caller expects nothing after it.
  bool atLast() const { return plan_ && next_ >= plan_->statements.size(); }

  // Ends the run being answered with `outcome` (recorded once) and starts the next statement's.
  void finish(history::Outcome outcome, std::string_view sqlstate = {},
              std::string_view message = {});
  // Hands the run being answered over, unrecorded (a write recorded once its count is in), and
  // starts the next statement's.
  std::shared_ptr<StatementRun> detach();
  // An ErrorResponse ends the run being answered (`bytes`: the message's) and every statement
  // after it is recorded as not executed.
  void error(std::string_view sqlstate, std::string_view message, size_t bytes);
  // Ends the run being answered, if any, and every statement not yet recorded with `outcome`.
  void finishRest(history::Outcome outcome, std::string_view sqlstate, std::string_view message);

 private:
  void next();

  RunSink& sink_;
  std::shared_ptr<const StatementPlan> plan_;
  guards::AgentOverrides overrides_;
  std::shared_ptr<StatementRun> run_;
  size_t next_ = 0;
  std::string_view host_;
};

}  // namespace pgwarden::session
