// Every guard kind a policy group may list: the chain's built-in kinds (guards/), lua and
// http_webhook (guards/), and budget (this module). budgets/ sits above guards/, so the registry
// that knows them all lives here, where the config parser reaches it.
#pragma once

#include <yaml-cpp/yaml.h>

#include "guards/guard.h"
#include "guards/policy.h"

namespace pgwarden::budgets {

// The registry with every kind pgwarden knows: the built-in ones plus lua, http_webhook, budget.
const guards::GuardRegistry& agentGuardRegistry();

// parsePolicyGroups with agentGuardRegistry(), plus the checks that span a group's guards (at
// most one budget guard per group). Throws config::ConfigError with line and key.
guards::PolicyMap parseAgentPolicyGroups(const YAML::Node& groups);

}  // namespace pgwarden::budgets
