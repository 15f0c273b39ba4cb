#include "session/prepared_registry.h"

namespace pgwarden::session {

std::shared_ptr<const StatementPlan> PreparedRegistry::plan(const std::string& name) const {
  const auto it = statements_.find(name);
  return it == statements_.end() ? nullptr : it->second;
}

PreparedRegistry::Previous PreparedRegistry::prepare(const std::string& name,
                                                     std::shared_ptr<const StatementPlan> plan) {
  Previous before;
  if (const auto existing = statements_.find(name); existing != statements_.end()) {
    before.had = true;
    before.plan = existing->second;
  }
  statements_[name] = std::move(plan);
  return before;
}

void PreparedRegistry::restore(const std::string& name, Previous previous) {
  if (previous.had) {
    statements_[name] = std::move(previous.plan);
  } else {
    statements_.erase(name);
  }
}

const std::vector<uint32_t>* PreparedRegistry::types(const std::string& name) const {
  const auto it = types_.find(name);
  return it == types_.end() ? nullptr : &it->second;
}

void PreparedRegistry::setOverrides(const std::string& name,
                                    const guards::AgentOverrides& overrides) {
  if (overrides.any()) {
    overrides_[name] = overrides;
  } else if (!overrides_.empty()) {
    overrides_.erase(name);
  }
}

const guards::AgentOverrides* PreparedRegistry::overrides(const std::string& name) const {
  const auto it = overrides_.find(name);
  return it == overrides_.end() ? nullptr : &it->second;
}

void PreparedRegistry::setWrite(const std::string& name, const GateVerdict::Write* write) {
  if (write) {
    writes_[name] = *write;
  } else if (!writes_.empty()) {
    writes_.erase(name);
  }
}

GateVerdict::Write PreparedRegistry::write(std::string_view name) const {
  const auto it = writes_.find(std::string(name));
  return it == writes_.end() ? GateVerdict::Write{} : it->second;
}

void PreparedRegistry::closeStatement(const std::string& name) {
  statements_.erase(name);
  writes_.erase(name);
  types_.erase(name);
  overrides_.erase(name);
}

const guards::AgentCommand* PreparedRegistry::agentStatement(const std::string& name) const {
  const auto it = agent_statements_.find(name);
  return it == agent_statements_.end() ? nullptr : &it->second;
}

void PreparedRegistry::addAgentStatement(const std::string& name, guards::AgentCommand cmd) {
  if (name.empty()) {
    statements_.erase(name);
    types_.erase(name);
    overrides_.erase(name);
  }
  agent_statements_[name] = std::move(cmd);
}

Portal* PreparedRegistry::portal(const std::string& name) {
  const auto it = portals_.find(name);
  return it == portals_.end() ? nullptr : &it->second;
}

std::shared_ptr<ScreenParams> PreparedRegistry::spareParams() {
  if (spare_portal_.empty()) return nullptr;
  return std::move(spare_portal_.mapped().params);
}

void PreparedRegistry::addPortal(const std::string& name, Portal portal) {
  if (spare_portal_.empty()) {
    portals_.emplace(name, std::move(portal));
    return;
  }
  spare_portal_.key() = name;
  spare_portal_.mapped() = std::move(portal);
  portals_.insert(std::move(spare_portal_));
}

void PreparedRegistry::endPortals() {
  if (spare_portal_.empty() && !portals_.empty()) {
    spare_portal_ = portals_.extract(portals_.begin());
    std::shared_ptr<ScreenParams> params = std::move(spare_portal_.mapped().params);
    trimScreenParams(params);
    spare_portal_.mapped() = Portal{};
    spare_portal_.mapped().params = std::move(params);
  }
  portals_.clear();
}

AgentPortal* PreparedRegistry::agentPortal(const std::string& name) {
  const auto it = agent_portals_.find(name);
  return it == agent_portals_.end() ? nullptr : &it->second;
}

}  // namespace pgwarden::session
