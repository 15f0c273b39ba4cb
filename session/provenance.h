// Provenance on the wire (docs/provenance.md): with `SET pgwarden.provenance = on`, each
// statement's CommandComplete is followed by a NOTICE whose DETAIL says where the answer came
// from, in the fields the MCP door's `provenance` object has. Pure.
#pragma once

#include <string>

#include "analysis/table_stats.h"
#include "session/statement_recorder.h"

namespace pgwarden::session {

// The NOTICE's DETAIL: {"code":"PROVENANCE","executed_sql":...,"rewritten":...,"verdicts":[...],
// "warnings":[...],"estimated_rows":n|null,"rows_returned":n,"truncated":b,"stats_age_seconds":n|null}.
// `stats`: the catalog statistics the statement was judged by (null: none loaded yet).
std::string provenanceDetail(const StatementRun& run, const analysis::TableStatsSnapshot* stats);

// Whether a `pgwarden.provenance` value turns it on ("on", "true", "1", "yes").
bool provenanceOn(const std::string& value);

}  // namespace pgwarden::session
