// The registry of every guard kind, and the policy-group checks that span a group's guards.
#include "budgets/guard_kinds.h"

#include <string>

#include "budgets/budget.h"
#include "common/config_util.h"
#include "guards/lua_guard.h"
#include "guards/webhook_guard.h"

namespace pgwarden::budgets {

const guards::GuardRegistry& agentGuardRegistry() {
  static const guards::GuardRegistry registry = [] {
    guards::GuardRegistry r = guards::GuardRegistry::builtin();
    r.add("lua", guards::makeLuaGuard);
    r.add("http_webhook", guards::makeWebhookGuard);
    r.add("budget", makeBudgetGuard);
    return r;
  }();
  return registry;
}

guards::PolicyMap parseAgentPolicyGroups(const YAML::Node& groups) {
  if (groups.IsMap()) {
    for (const auto& kv : groups) {
      const YAML::Node list = kv.second.IsMap() ? kv.second["guards"] : YAML::Node();
      if (!list.IsDefined() || !list.IsSequence()) continue;
      int budgets = 0;
      for (size_t i = 0; i < list.size(); ++i) {
        const YAML::Node g = list[i];
        if (!g.IsMap() || !g["kind"].IsScalar() || g["kind"].as<std::string>() != "budget") continue;
        if (++budgets > 1) {
          config::fail(g["kind"], "groups." + kv.first.as<std::string>() + ".guards[" + std::to_string(i) + "].kind",
                       "a group has at most one budget guard (put every limit in one)");
        }
      }
    }
  }
  return guards::parsePolicyGroups(groups, agentGuardRegistry());
}

}  // namespace pgwarden::budgets
