// guards: the `groups:` config. The example config parses into the documented chains; every
// mistake is a ConfigError naming the line and the dotted key.
#include "common/config_util.h"
#include "guards/guard.h"
#include "tests/unit/guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

struct Bad {
  const char* name;
  const char* yaml;
  int line;
  const char* key;
  const char* says;
};
std::ostream& operator<<(std::ostream& os, const Bad& b) { return os << b.name; }

class GroupsConfigError : public ::testing::TestWithParam<Bad> {};

TEST_P(GroupsConfigError, NamesLineAndKey) {
  const Bad& b = GetParam();
  try {
    parsePolicyGroups(YAML::Load(b.yaml));
    FAIL() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.line(), b.line) << e.what();
    EXPECT_EQ(e.key(), b.key) << e.what();
    EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, GroupsConfigError,
    ::testing::Values(
        Bad{"UnknownKind",
            "agents:\n  guards:\n    - kind: read_only\n    - kind: read_olny\n", 4, "groups.agents.guards[1].kind",
            "unknown guard kind 'read_olny'"},
        Bad{"UnknownGuardKey",
            "agents:\n  guards:\n    - kind: row_limit\n      max_rows: 10\n      max_rowz: 5\n", 5,
            "groups.agents.guards[0].max_rowz", "unknown key 'max_rowz'"},
        Bad{"BadIntType", "agents:\n  guards:\n    - kind: row_limit\n      max_rows: lots\n", 4,
            "groups.agents.guards[0].max_rows", "expected an integer"},
        Bad{"NegativeLimit", "agents:\n  guards:\n    - kind: row_limit\n      max_limit: -5\n", 4,
            "groups.agents.guards[0].max_limit", "out of range"},
        Bad{"BadBool",
            "agents:\n  guards:\n    - kind: functions\n      builtin_deny: maybe\n", 4,
            "groups.agents.guards[0].builtin_deny", "expected true or false"},
        Bad{"BadDouble",
            "agents:\n  guards:\n    - kind: functions\n      max_sleep_seconds: [1]\n", 4,
            "groups.agents.guards[0].max_sleep_seconds", "expected a number"},
        Bad{"UnknownGroupKey", "agents:\n  search_path: [public]\n  guardz: []\n", 3, "groups.agents.guardz",
            "unknown key 'guardz'"},
        Bad{"GuardsNotAList", "agents:\n  guards:\n    kind: read_only\n", 3, "groups.agents.guards", "expected a list"},
        Bad{"GuardNotAMap", "agents:\n  guards:\n    - read_only\n", 3, "groups.agents.guards[0]", "expected a mapping"},
        Bad{"MissingKind", "agents:\n  guards:\n    - max_rows: 5\n", 3, "groups.agents.guards[0].kind", "needs a kind"},
        Bad{"BadAction", "agents:\n  guards:\n    - kind: read_only\n      action: shout\n", 4,
            "groups.agents.guards[0].action", "expected deny or warn"},
        Bad{"RowLimitWithoutLimits", "agents:\n  guards:\n    - kind: row_limit\n", 3, "groups.agents.guards[0]",
            "needs max_limit, max_rows or both"},
        Bad{"TablesWithoutLists", "agents:\n  guards:\n    - kind: tables\n", 3, "groups.agents.guards[0]",
            "needs an allow or a deny list"},
        Bad{"UnqualifiedPattern", "agents:\n  guards:\n    - kind: tables\n      deny: [pg_authid]\n", 3,
            "groups.agents.guards[0]", "must be schema-qualified"},
        Bad{"CostGateWithoutTables", "agents:\n  guards:\n    - kind: cost_gate\n      max_cost: 1000\n", 3,
            "groups.agents.guards[0]", "needs tables, seq_scan_rows or both"},
        Bad{"CostGateFailBehavior",
            "agents:\n  guards:\n    - kind: cost_gate\n      tables: [public.t]\n      fail_behavior: maybe\n", 5,
            "groups.agents.guards[0].fail_behavior", "expected deny or allow"},
        Bad{"CostGateSeqScan",
            "agents:\n  guards:\n    - kind: cost_gate\n      tables: [public.t]\n      seq_scan: sometimes\n", 5,
            "groups.agents.guards[0].seq_scan", "expected deny or allow"},
        Bad{"CostGatePlan",
            "agents:\n  guards:\n    - kind: cost_gate\n      tables: [public.t]\n      plan: some\n", 5,
            "groups.agents.guards[0].plan", "expected all or joins"},
        Bad{"CostGateThatChecksNothing",
            "agents:\n  guards:\n    - kind: cost_gate\n      seq_scan_rows: 10\n      seq_scan: allow\n", 5,
            "groups.agents.guards[0].seq_scan", "set max_cost or max_join_growth"},
        Bad{"CostGateJoinGrowth",
            "agents:\n  guards:\n    - kind: cost_gate\n      tables: [public.t]\n      max_join_growth: -1\n", 5,
            "groups.agents.guards[0].max_join_growth", "must be 0 (off) or more"},
        Bad{"FunctionsMode", "agents:\n  guards:\n    - kind: functions\n      mode: strict\n", 4,
            "groups.agents.guards[0].mode", "expected deny or allow"},
        Bad{"AllowModeNeedsList", "agents:\n  guards:\n    - kind: functions\n      mode: allow\n", 3,
            "groups.agents.guards[0].allow", "non-empty allow list"},
        Bad{"ZeroStatements", "agents:\n  guards:\n    - kind: multi_statement\n      max_statements: 0\n", 4,
            "groups.agents.guards[0].max_statements", "out of range"},
        Bad{"ReasonForAbsentGuard",
            "agents:\n  reasons:\n    MISSING_PREDICATE: x\n  guards:\n    - kind: read_only\n", 3,
            "groups.agents.reasons.MISSING_PREDICATE", "no guard of this group answers with MISSING_PREDICATE"},
        Bad{"ReasonCodeCase", "agents:\n  reasons:\n    read_only: x\n  guards:\n    - kind: read_only\n", 3,
            "groups.agents.reasons.read_only", "upper case"},
        Bad{"ReasonNotText", "agents:\n  reasons:\n    READ_ONLY: [a, b]\n  guards:\n    - kind: read_only\n", 3,
            "groups.agents.reasons.READ_ONLY", "expected a message"},
        Bad{"GroupNotAMap", "agents: [read_only]\n", 1, "groups.agents", "expected a mapping"}));

TEST(GroupsConfig, GroupsMustBeAMap) {
  EXPECT_THROW(parsePolicyGroups(YAML::Load("- agents\n")), config::ConfigError);
}

TEST(GroupsConfig, ExampleConfigParsesIntoTheDocumentedChains) {
  const auto& groups = test::exampleGroups();
  ASSERT_EQ(groups.count("agents"), 1u);
  ASSERT_EQ(groups.count("analysts"), 1u);
  const auto& agents = *groups.at("agents");
  std::vector<std::string> kinds;
  for (const auto& g : agents.guards()) kinds.emplace_back(g->kind());
  EXPECT_EQ(kinds, (std::vector<std::string>{"read_only", "multi_statement", "functions", "tables",
                                             "require_predicate", "row_limit", "cost_gate"}));
  EXPECT_EQ(agents.searchPath(), std::vector<std::string>{"public"});
  EXPECT_EQ(agents.name(), "agents");
}

TEST(GroupsConfig, EveryBuiltInGuardKindIsRegistered) {
  for (const char* kind : {"cost_gate", "functions", "multi_statement", "read_only", "require_predicate",
                           "row_limit", "tables"}) {
    EXPECT_NE(GuardRegistry::builtin().find(kind), nullptr) << kind;
  }
  EXPECT_EQ(GuardRegistry::builtin().find("no_such_kind"), nullptr);
}

TEST(GroupsConfig, AnotherRegistryAddsKinds) {
  class Always final : public Guard {
   public:
    std::string_view kind() const override { return "always_warn"; }
    std::vector<std::string_view> codes() const override { return {"*"}; }
    GuardResult checkStatement(const GuardInput&, const StatementInfo&) const override {
      GuardResult r;
      r.action = Action::kWarn;
      r.code = "CUSTOM_CODE";
      r.message = "custom";
      return r;
    }
  };
  GuardRegistry registry = GuardRegistry::builtin();
  registry.add("always_warn", [](const YAML::Node& node, const std::string& path, const GroupSettings&) {
    checkGuardKeys(node, path, {});
    return std::unique_ptr<Guard>(new Always());
  });
  const auto groups = parsePolicyGroups(
      YAML::Load("g:\n  reasons:\n    CUSTOM_CODE: overridden\n  guards:\n    - kind: always_warn\n"), registry);
  const Decision d = test::evaluate(*groups.at("g"), "SELECT 1", nullptr);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0].message, "overridden");
  EXPECT_EQ(d.warnings[0].guard, "always_warn");
}

}  // namespace
}  // namespace pgwarden::guards
