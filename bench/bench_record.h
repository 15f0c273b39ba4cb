// The statement records the history and contention benchmarks submit: an agent's read as the
// recorder receives it. The fields both share are built here; each benchmark adds its own text,
// tables and counts.
#pragma once

#include <cstdint>
#include <string>

#include "history/record.h"
#include "history/recorder.h"

namespace pgwarden::bench {

// Record `i` of agent-17's conversations (1,000 of them over 64 sessions), one every `spacing_us`,
// each `duration_us` long, a successful SELECT of one fingerprint.
inline history::Record agentRecord(uint64_t i, int64_t spacing_us, int64_t duration_us) {
  history::Record r;
  r.started_at_us = 1714564800000000 + static_cast<int64_t>(i) * spacing_us;
  r.finished_at_us = r.started_at_us + duration_us;
  r.duration_us = duration_us;
  r.session_id = i % 64;
  r.user = "agent";
  r.database = "analytics";
  r.policy_group = "agents";
  r.agent_id = "agent-17";
  r.conversation_id = "conv-" + std::to_string(i % 1000);
  r.statement_kind = "select";
  r.fingerprint = "a1b2c3d4e5f60718";
  r.outcome = history::Outcome::kOk;
  return r;
}

}  // namespace pgwarden::bench
