// The front ends' one call into the result screens: a finished statement run (its plan's
// analysis, the rows it sent, the row cap, its Bind's values) is screened against the catalog
// snapshot, and what the screens found is kept on the run for history and metrics.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "guards/policy.h"
#include "protocol/messages.h"
#include "session/statement_recorder.h"

namespace pgwarden::session {

// Sets `params` to the Bind's text-format values when a screen may need them (the statement is
// screened and has parameters), else to null, so most Binds keep nothing. The storage `params`
// held is refilled in place when nothing else shares it (the run of a portal bound again is
// done with it), so a client that binds the same portal over and over allocates nothing here.
void screenParams(const StatementPlan* plan, const protocol::BindMsg& bind,
                  std::shared_ptr<ScreenParams>& params);
// Lets go of `params` when it holds more than Binds of an ordinary size leave (kept storage stays
// bounded).
void trimScreenParams(std::shared_ptr<ScreenParams>& params);

// Whether a result's first row of one column is zero: "0" as text, or an all-zero binary
// integer (int2/int4/int8). With one row, that is the single zero of a count that found nothing.
bool isZeroCell(std::string_view v);

// screens::nothingMatched on what `run` has received so far (false when it was not analysed).
bool nothingMatchedYet(const StatementRun& run);

// Whether the screens could say anything about `run`'s result as it stands: when false (nearly
// always), nothing more is looked up.
bool screenMaySpeak(const StatementRun& run);

// Screens `run`'s result once (a suspended portal is screened when it completes); the findings
// are left in run.screens. Cheap and silent for a statement no screen can speak about.
const std::vector<guards::Verdict>& screenRun(StatementRun& run, const guards::PolicyGroup* policy,
                                              const analysis::TableStatsSnapshot* stats);

// The probe the screens would ask for before `run`'s reply (screens/probe.h): its group has
// screen_probe_timeout, it asked none yet, and nothing matched where the statistics cannot say
// why. Nothing for nearly every result (a few compares).
std::optional<screens::ProbeRequest> screenProbe(const StatementRun& run,
                                                 const guards::PolicyGroup* policy,
                                                 const analysis::TableStatsSnapshot* stats);

// The screen to deny with: the first finding whose action is deny, or null.
const guards::Verdict* screenDenial(const StatementRun& run);

}  // namespace pgwarden::session
