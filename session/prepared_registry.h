// A client's prepared statements and portals (the extended protocol's named objects), bounded
// together by limits.max_prepared_statements: what pgwarden knows of each statement (the gate's
// plan, the text's comment overrides, the parameter types a deferred cost gate needs, a guarded
// write's target), each portal's plan and run, and the statements and portals that are
// pgwarden's own SET/RESET/SHOW pgwarden.* commands, answered without the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "guards/agent_context.h"
#include "session/result_screen.h"
#include "session/statement_gate.h"
#include "session/statement_recorder.h"

namespace pgwarden::session {

// A bound portal: the plan of the statement it was bound from, the run of its current execution,
// the statement's comment overrides, the Bind's values when a result screen may need them, and a
// write prepared over the extended protocol (guarded writes).
struct Portal {
  std::shared_ptr<const StatementPlan> plan;
  std::shared_ptr<StatementRun> run;
  guards::AgentOverrides overrides;
  std::shared_ptr<ScreenParams> params;
  GateVerdict::Write write;
};

// A portal of a SET/RESET/SHOW pgwarden.* statement: pgwarden answers its Describe and Execute;
// `format` is the result column's format code from the Bind.
struct AgentPortal {
  guards::AgentCommand cmd;
  int16_t format = 0;
};

class PreparedRegistry {
 public:
  explicit PreparedRegistry(size_t limit) : limit_(limit) {}

  size_t limit() const { return limit_; }

  // --- Statements the server prepares ---
  // A Parse of `name` would add one over the limit (the unnamed statement never counts).
  bool statementsFull(const std::string& name) const {
    return !name.empty() && !statements_.count(name) && statements_.size() >= limit_;
  }
  bool hasStatement(const std::string& name) const { return statements_.count(name) > 0; }
  // The plan `name` was judged with; null when there is no such statement.
  std::shared_ptr<const StatementPlan> plan(const std::string& name) const;
  // What a name meant before a Parse gave it a new plan (restored if the server refuses it).
  struct Previous {
    std::shared_ptr<const StatementPlan> plan;
    bool had = false;
  };
  Previous prepare(const std::string& name, std::shared_ptr<const StatementPlan> plan);
  void restore(const std::string& name, Previous previous);
  void forgetPlan(const std::string& name) { statements_.erase(name); }
  // The parameter types of a statement whose cost gate waits for its Bind (its EXPLAIN needs them).
  void setTypes(const std::string& name, std::vector<uint32_t> types) {
    types_[name] = std::move(types);
  }
  const std::vector<uint32_t>* types(const std::string& name) const;
  // The statement's comment overrides (none: nothing kept), which Bind hands to its portal.
  void setOverrides(const std::string& name, const guards::AgentOverrides& overrides);
  const guards::AgentOverrides* overrides(const std::string& name) const;
  // A write the statement prepares under guarded writes (none: nothing kept).
  void setWrite(const std::string& name, const GateVerdict::Write* write);
  GateVerdict::Write write(std::string_view name) const;
  // A Close of the statement: all of it goes.
  void closeStatement(const std::string& name);

  // --- pgwarden's own statements ---
  const guards::AgentCommand* agentStatement(const std::string& name) const;
  bool agentStatementsFull(const std::string& name) const {
    return !name.empty() && agent_statements_.size() >= limit_;
  }
  // `name` is pgwarden's now: the unnamed one replaces the server's, so Bind "" finds it here.
  void addAgentStatement(const std::string& name, guards::AgentCommand cmd);
  bool eraseAgentStatement(const std::string& name) { return agent_statements_.erase(name) > 0; }
  bool anyAgent() const { return !agent_statements_.empty() || !agent_portals_.empty(); }

  // --- Portals ---
  Portal* portal(const std::string& name);
  bool hasPortal(const std::string& name) const { return portals_.count(name) > 0; }
  bool portalsFull() const { return portals_.size() >= limit_; }
  bool anyPortal() const { return !portals_.empty(); }
  // The values' storage of the entry kept from an earlier transaction, for a new portal's Bind.
  std::shared_ptr<ScreenParams> spareParams();
  // A new portal (none of that name): the kept entry is reused, no map node to allocate.
  void addPortal(const std::string& name, Portal portal);
  void erasePortal(const std::string& name) { portals_.erase(name); }
  template <class F>
  void forEachPortal(F&& f) {
    for (auto& [name, p] : portals_) f(p);
  }
  // The transaction's portals end: one entry is kept for the next Bind (most clients bind one
  // portal per transaction) with its values' storage; what it pointed to is let go.
  void endPortals();
  void clearPortals() { portals_.clear(); }

  // --- pgwarden's own portals ---
  AgentPortal* agentPortal(const std::string& name);
  bool hasAgentPortal(const std::string& name) const { return agent_portals_.count(name) > 0; }
  bool agentPortalsFull() const { return agent_portals_.size() >= limit_; }
  void addAgentPortal(const std::string& name, AgentPortal portal) {
    agent_portals_[name] = std::move(portal);
  }
  bool eraseAgentPortal(const std::string& name) { return agent_portals_.erase(name) > 0; }

 private:
  size_t limit_;
  std::unordered_map<std::string, std::shared_ptr<const StatementPlan>> statements_;
  std::unordered_map<std::string, std::vector<uint32_t>> types_;
  std::unordered_map<std::string, guards::AgentOverrides> overrides_;
  std::unordered_map<std::string, GateVerdict::Write> writes_;
  std::unordered_map<std::string, guards::AgentCommand> agent_statements_;
  std::unordered_map<std::string, Portal> portals_;
  std::unordered_map<std::string, AgentPortal> agent_portals_;
  // An entry of portals_ kept when a transaction's portals ended, for the next Bind (empty: none).
  std::unordered_map<std::string, Portal>::node_type spare_portal_;
};

}  // namespace pgwarden::session
