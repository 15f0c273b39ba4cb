// libFuzzer target: what an agent says about itself in a statement, read without the server: the
// sqlcommenter-style comment, `SET/RESET/SHOW pgwarden.<key>` commands and percent-decoding.
// Whatever is accepted must satisfy the rules that keep it out of logs raw.
#include "guards/agent_context.h"
#include "tests/fuzz/fuzz_util.h"

namespace g = pgwarden::guards;

namespace {

void checkValue(const std::optional<std::string>& v) {
  if (v) PGW_FUZZ_CHECK(g::agentValueProblem(*v).empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view sql(reinterpret_cast<const char*>(data), size);

  const g::AgentOverrides o = g::parseSqlComment(sql);
  checkValue(o.agent_id);
  checkValue(o.conversation_id);
  checkValue(o.query_intent);

  const g::AgentCommand cmd = g::parseAgentCommand(sql);
  switch (cmd.kind) {
    case g::AgentCommand::Kind::kSet:
      PGW_FUZZ_CHECK(cmd.value.empty() || g::agentValueProblem(cmd.value).empty());
      break;
    case g::AgentCommand::Kind::kError:
      PGW_FUZZ_CHECK(cmd.sqlstate.size() == 5 && !cmd.error.empty());
      break;
    default:
      break;
  }
  if (cmd.kind != g::AgentCommand::Kind::kNone) (void)g::agentCommandTag(cmd);

  if (auto decoded = g::percentDecode(sql)) PGW_FUZZ_CHECK(decoded->size() <= sql.size());
  (void)g::agentKeyFromName(sql);
  return 0;
}
