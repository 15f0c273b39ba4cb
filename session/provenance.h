// Provenance on the wire (docs/provenance.md): with `SET pgwarden.provenance = on`, each
// statement's CommandComplete is followed by a NOTICE whose DETAIL says where the answer came
// from, in the fields the MCP door's `provenance` object has. Pure.
#pragma once

#include <string>

#include "session/statement_recorder.h"

namespace pgwarden::daemon {

// The NOTICE's DETAIL: {"code":"PROVENANCE","executed_sql":...,"rewritten":...,"verdicts":[...],
// "warnings":[...],"rows_returned":n}.
std::string provenanceDetail(const StatementRun& run);

// Whether a `pgwarden.provenance` value turns it on ("on", "true", "1", "yes").
bool provenanceOn(const std::string& value);

}  // namespace pgwarden::daemon
