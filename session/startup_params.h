// What a client may carry in its StartupMessage. Pure functions: ordinary client parameters are
// kept to be applied on the server connection, pgwarden's own keys (agent_id, conversation_id,
// query_intent) are taken for the session, and any attempt to set a server setting is refused.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/param_list.h"
#include "common/result.h"

namespace pgwarden::session {

// Longest value accepted for agent_id, conversation_id and query_intent.
inline constexpr size_t kMaxContextValue = 256;

struct ClientStartup {
  std::string user;
  std::string database;
  // Client parameters to apply on the server connection, canonical names, in order, deduplicated
  // (the last value sent wins, as in PostgreSQL). search_path is not in here: see below.
  ParamList params;
  // search_path asked for at start-up; the caller checks the user's group allows it.
  std::optional<std::string> search_path;
  std::string application_name;
  std::string agent_id;
  std::string conversation_id;
  std::string query_intent;
  // Protocol extension options ("_pq_.*") we do not support; listed in NegotiateProtocolVersion.
  std::vector<std::string> unrecognized_protocol_options;
};

struct StartupRefusal {
  std::string sqlstate;  // 28000 (no user), 42501 (not allowed), 22023 (bad value), 08P01
  std::string message;
};

struct StartupFilterResult {
  std::optional<ClientStartup> startup;  // set when accepted
  StartupRefusal refusal;                // set otherwise
};

// Splits and checks the startup parameters of a v3 StartupMessage.
StartupFilterResult filterStartupParams(const ParamList& params);

// Parses an `options` value as PostgreSQL splits it (whitespace separated, backslash escapes)
// into name=value settings: "-c name=value", "-cname=value" and "--name=value" are accepted,
// every other switch is an error naming it. Names are returned as written.
Result<ParamList> parseOptions(std::string_view options);

// The canonical spelling of an ordinary client parameter we forward ("datestyle" -> "DateStyle"),
// or nullptr when the name is not one of them. Case-insensitive, as GUC names are.
const char* canonicalClientParam(std::string_view name);

// "agent_id", "conversation_id" or "query_intent" for pgwarden's own keys, with or without the
// "pgwarden." prefix; nullptr otherwise.
const char* contextKey(std::string_view name);

}  // namespace pgwarden::session
