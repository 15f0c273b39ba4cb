#include "session/result_screen.h"

#include "guards/masking.h"
#include "screens/screen.h"

namespace pgwarden::session {

namespace {

const analysis::StatementInfo* statementOf(const StatementPlan* plan, size_t index) {
  if (!plan || !plan->analysis || !plan->analysis->ok || index >= plan->analysis->statements.size()) {
    return nullptr;
  }
  return &plan->analysis->statements[index];
}

// Refilled values storage is given up once it holds more than this (one huge Bind does not pin
// its memory for the session's life).
constexpr size_t kKeepParamBytes = 64 * 1024;

size_t heldParamBytes(const ScreenParams& params) {
  size_t n = params.capacity() * sizeof(ScreenParams::value_type);
  for (const auto& p : params) {
    if (p && p->capacity() > std::string().capacity()) n += p->capacity();
  }
  return n;
}

screens::ResultSummary summaryOf(const StatementRun& run) {
  screens::ResultSummary r;
  r.rows = run.rows_sent;
  r.single_zero = run.single_zero && run.rows_sent == 1;
  r.single_null = run.single_null && run.rows_sent == 1;
  r.truncated = run.truncated;
  r.row_cap = run.max_rows;
  if (run.plan && run.index < run.plan->statements.size() &&
      !run.plan->statements[run.index].checks.empty()) {
    r.checks = &run.plan->statements[run.index].checks;
    r.failures = &run.assertion_failures;
  }
  return r;
}

}  // namespace

bool isZeroCell(std::string_view v) {
  if (v == "0") return true;
  if (v.size() == 2 || v.size() == 4 || v.size() == 8) {
    for (char c : v) {
      if (c != 0) return false;
    }
    return true;
  }
  return false;
}

bool nothingMatchedYet(const StatementRun& run) {
  const analysis::StatementInfo* st = statementOf(run.plan.get(), run.index);
  return st && screens::nothingMatched(summaryOf(run), *st);
}

bool screenMaySpeak(const StatementRun& run) {
  const analysis::StatementInfo* st = statementOf(run.plan.get(), run.index);
  return st && run.screens.empty() && screens::maySpeak(*st, summaryOf(run));
}

void trimScreenParams(std::shared_ptr<ScreenParams>& params) {
  if (params && heldParamBytes(*params) > kKeepParamBytes) params.reset();
}

void screenParams(const StatementPlan* plan, const protocol::BindMsg& bind,
                  std::shared_ptr<ScreenParams>& params) {
  const analysis::StatementInfo* st = statementOf(plan, 0);
  if (!st || st->max_param == 0 || bind.params.empty() || !screens::worthScreening(*st)) {
    params.reset();
    return;
  }
  trimScreenParams(params);
  if (!params || params.use_count() != 1) params = std::make_shared<ScreenParams>();
  ScreenParams& out = *params;
  out.resize(bind.params.size());
  for (size_t i = 0; i < bind.params.size(); ++i) {
    // One format code applies to all parameters; none means text.
    const int16_t format = bind.param_formats.empty() ? 0
                           : bind.param_formats.size() == 1 ? bind.param_formats[0]
                           : i < bind.param_formats.size() ? bind.param_formats[i] : 1;
    if (format == 0 && bind.params[i]) {
      // assign() keeps the string's storage from the last Bind.
      if (out[i]) {
        out[i]->assign(*bind.params[i]);
      } else {
        out[i].emplace(*bind.params[i]);
      }
    } else {
      out[i].reset();
    }
  }
}

namespace {

// What the screens read of `run` (`st` its statement); `visible` keeps the statistics a masking
// group may see alive while `in` is used.
screens::ScreenInput inputOf(const StatementRun& run, const analysis::StatementInfo* st,
                             const guards::PolicyGroup* policy,
                             const analysis::TableStatsSnapshot* stats,
                             std::shared_ptr<const analysis::TableStatsSnapshot>& visible) {
  screens::ScreenInput in;
  in.statement = st;
  if (run.index < run.plan->statements.size() && !run.plan->statements[run.index].sql_truncated) {
    in.sql = run.plan->statements[run.index].sql;
  }
  in.result = summaryOf(run);
  // A group's masked columns: their statistics (known values, bounds) are their values.
  visible = policy && policy->masking() ? policy->masking()->visibleStats(stats) : nullptr;
  in.stats = visible ? visible.get() : stats;
  in.group = policy;
  in.params = run.params.get();
  in.probe = run.probe.get();
  return in;
}

}  // namespace

const std::vector<guards::Verdict>& screenRun(StatementRun& run, const guards::PolicyGroup* policy,
                                              const analysis::TableStatsSnapshot* stats) {
  const analysis::StatementInfo* st = statementOf(run.plan.get(), run.index);
  if (!st || !run.screens.empty()) return run.screens;
  std::shared_ptr<const analysis::TableStatsSnapshot> visible;
  run.screens = screens::screenResult(inputOf(run, st, policy, stats, visible));
  return run.screens;
}

std::optional<screens::ProbeRequest> screenProbe(const StatementRun& run,
                                                 const guards::PolicyGroup* policy,
                                                 const analysis::TableStatsSnapshot* stats) {
  if (!policy || policy->settings().screen_probe_ms <= 0 || run.probe || !run.screens.empty())
    return std::nullopt;
  const analysis::StatementInfo* st = statementOf(run.plan.get(), run.index);
  if (!st || !screens::maySpeak(*st, summaryOf(run))) return std::nullopt;
  std::shared_ptr<const analysis::TableStatsSnapshot> visible;
  return screens::probeRequest(inputOf(run, st, policy, stats, visible),
                               policy->settings().screen_probe_ms);
}

const guards::Verdict* screenDenial(const StatementRun& run) {
  for (const auto& v : run.screens) {
    if (v.action == guards::Action::kDeny) return &v;
  }
  return nullptr;
}

}  // namespace pgwarden::session
