// Who a client session speaks for, and its pgwarden.* settings.
#include "session/caller.h"

namespace pgwarden::session {

void Caller::startAgent(std::string agent_id, std::string conversation_id,
                        std::string query_intent) {
  agent_[0] = std::move(agent_id);
  agent_[1] = std::move(conversation_id);
  agent_[2] = std::move(query_intent);
}

const std::string& Caller::agentSetting(guards::AgentKey key) const {
  return agent_[static_cast<size_t>(key)];
}

void Caller::setAgentSetting(guards::AgentKey key, std::string value) {
  if (!agent_defaults_) agent_defaults_ = agent_;
  agent_[static_cast<size_t>(key)] = std::move(value);
}

void Caller::resetAgentSetting(guards::AgentKey key) {
  if (!agent_defaults_) agent_defaults_ = agent_;
  const size_t i = static_cast<size_t>(key);
  agent_[i] = (*agent_defaults_)[i];
}

}  // namespace pgwarden::session
