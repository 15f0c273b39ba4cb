// What happens to a statement once the gate has judged it, whichever door it came through (the
// wire protocol's ClientSession, the MCP endpoint's StatementRunner): the wait for the first
// catalog statistics before judging, a door's own row cap written into the text, the result
// screens with their one rule for when a finding denies, and the records of the statements of
// a text that never ran. Each door calls these; none keeps its own copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "guards/agent_context.h"
#include "guards/policy.h"
#include "session/result_screen.h"
#include "session/statement_recorder.h"

namespace pgwarden::daemon {

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

}  // namespace pgwarden::daemon
