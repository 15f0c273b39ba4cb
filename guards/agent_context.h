// Who an agent says it is, per statement: the sqlcommenter-style comment a statement may carry
// (`/* conversation_id='c-42',agent_id='planner' */`) and the `SET/RESET/SHOW pgwarden.<key>`
// commands a session answers itself. Pure text work; the session decides what to do with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "guards/guard.h"

namespace pgwarden::guards {

// The keys an agent may set. They steer a cooperative agent; they are not identity.
// kProvenance: `SET pgwarden.provenance = on` (docs/provenance.md); not a comment override.
enum class AgentKey { kAgentId, kConversationId, kQueryIntent, kProvenance };
const char* agentKeyName(AgentKey key);  // "agent_id", "conversation_id", "query_intent"
std::optional<AgentKey> agentKeyFromName(std::string_view name);  // case-insensitive

// Values longer than this, or holding control characters, are refused: they reach logs,
// history and webhook documents.
inline constexpr size_t kMaxAgentValueBytes = 256;
// Empty when `value` is acceptable, else why not (for the client).
std::string agentValueProblem(std::string_view value);

// Per-statement overrides from a comment; unset keys keep the session's values.
struct AgentOverrides {
  std::optional<std::string> agent_id;
  std::optional<std::string> conversation_id;
  std::optional<std::string> query_intent;
  bool any() const { return agent_id || conversation_id || query_intent; }
};

// Reads the first comment of `sql` when it comes before any token, else the last one when it
// comes after every token (a trailing `;` and whitespace may follow). The comment must be
// sqlcommenter-shaped: comma-separated key='value' pairs, keys and values percent-encoded, `\'`
// for a quote inside a value. Unknown keys (traceparent, framework, ...) are skipped; a value
// that fails agentValueProblem() is skipped. Anything else yields no overrides.
AgentOverrides parseSqlComment(std::string_view sql);

// Percent-decoding as sqlcommenter encodes (RFC 3986; '+' stays '+'). nullopt on a bad escape.
std::optional<std::string> percentDecode(std::string_view s);

// A `SET/RESET/SHOW pgwarden.<key>` the session answers without the server.
struct AgentCommand {
  enum class Kind {
    kNone,        // not such a command: run it through the chain as usual
    kSet,         // SET [SESSION|LOCAL] pgwarden.key {=|TO} 'value'  (value "" clears)
    kReset,       // RESET pgwarden.key, or SET ... TO DEFAULT
    kShow,        // SHOW pgwarden.key
    kError,       // pgwarden.<something> that cannot be accepted: answer ErrorResponse
  };
  Kind kind = Kind::kNone;
  AgentKey key = AgentKey::kAgentId;
  std::string value;     // kSet
  std::string sqlstate;  // kError: 42704 unknown key, 22023 bad value, 42601 malformed
  std::string error;     // kError: message for the client
  bool local = false;    // SET LOCAL (applied to the session all the same)
  std::string text;      // the statement as the client sent it (set by the caller, for history)
};

// Recognises one such command making up the whole text (comments, whitespace and one trailing
// `;` allowed). Anything naming the pgwarden.* namespace that is not a valid command of ours is
// kError, so it never reaches the server as a placeholder setting.
AgentCommand parseAgentCommand(std::string_view sql);

// The tag of the CommandComplete a local answer ends with: "SET", "RESET" or "SHOW".
const char* agentCommandTag(const AgentCommand& cmd);

// What an operator's script or policy service sees of a text (Lua `ctx`, the webhook's JSON):
// the same document for both, built once per check from the guard input.
struct ContextTable {
  std::string name;           // schema-qualified as written
  bool has_predicate = false;
  bool written = false;
};
struct ContextStatement {
  std::string kind;           // "select", ...
  std::string command;        // "SELECT", ...
  std::string intent;         // inferred
  std::vector<ContextTable> tables;
  std::vector<std::string> functions;
  std::optional<int64_t> limit;  // constant outermost LIMIT
};
struct ContextDoc {
  std::string sql;
  std::string fingerprint;
  std::string user, database, group, agent_id, conversation_id, application_name, client_addr;
  std::string query_intent;           // as sent by the client, else the inferred one
  std::string query_intent_sent;      // "" when the client sent none
  std::string query_intent_inferred;  // from the first statement
  bool extended = false;
  std::vector<std::string> kinds;     // per statement
  std::vector<std::string> tables;    // distinct, in order of appearance
  std::vector<std::string> functions; // distinct
  std::map<std::string, bool> has_predicate;  // table -> every read of it filtered
  std::optional<int64_t> limit;       // the first statement's constant LIMIT
  std::vector<ContextStatement> statements;
  bool has_budget = false;            // the counters below are known
  int64_t budget_statements = 0, budget_denied = 0, budget_rows = 0;
};
ContextDoc buildContextDoc(const GuardInput& in);
// One line of JSON; budget counters under "budget", has_predicate as an object.
std::string contextJson(const ContextDoc& doc);

}  // namespace pgwarden::guards
