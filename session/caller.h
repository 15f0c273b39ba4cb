// Who a client session speaks for: the user and database of its login, the group and policy that
// judge its statements, the settings it carries (startup parameters, search_path), and its
// pgwarden.* settings (agent_id, conversation_id, query_intent, provenance), which SET and RESET
// change while the session lasts (RESET goes back to what the session started with).
#pragma once

#include <array>
#include <optional>
#include <string>

#include "config/config.h"
#include "guards/agent_context.h"
#include "session/startup_params.h"

namespace pgwarden::guards {
class PolicyGroup;
}

namespace pgwarden::session {

class Caller {
 public:
  std::string user;
  std::string database;         // as the client named it
  std::string server_database;  // as the upstream server names it (upstream.databases)
  std::string group;
  std::string application_name;
  const config::UserConfig* user_config = nullptr;  // points into the session's config
  const guards::PolicyGroup* policy = nullptr;
  ParamList client_params;  // the carried settings the client has now
  std::optional<std::string> search_path;

  const std::string& agentId() const { return agent_[0]; }
  const std::string& conversationId() const { return agent_[1]; }
  const std::string& queryIntent() const { return agent_[2]; }
  const std::string& provenance() const { return agent_[3]; }
  // The values the client started with (startup parameters or options).
  void startAgent(std::string agent_id, std::string conversation_id, std::string query_intent);
  // pgwarden.<key>: its value now; SET; RESET to the value the session started with.
  const std::string& agentSetting(guards::AgentKey key) const;
  void setAgentSetting(guards::AgentKey key, std::string value);
  void resetAgentSetting(guards::AgentKey key);

 private:
  // agent_id, conversation_id, query_intent, provenance (indexed by guards::AgentKey).
  std::array<std::string, 4> agent_{"", "", "", "off"};
  // What RESET goes back to: taken at the first SET or RESET.
  std::optional<std::array<std::string, 4>> agent_defaults_;
};

}  // namespace pgwarden::session
