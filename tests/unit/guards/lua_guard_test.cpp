// The Lua guard: allow/deny/warn through the chain, what ctx carries, the sandbox (no os, io,
// require, load, debug, string.dump, __gc), the instruction and memory limits (and that the state
// stays usable after them), bad returns, fail_behavior, and compile errors naming file and line.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <vector>

#include "agent_test_util.h"
#include "housekeeping_texts.h"
#include "common/config_util.h"
#include "budgets/budget.h"
#include "guards/lua_guard.h"

namespace pgwarden::guards {
namespace {

using agent_test::groups;

std::string group(const std::string& guard_yaml) {
  return "g:\n  guards:\n" + guard_yaml;
}

// A group with one inline Lua guard whose body is `body` (indented for YAML).
PolicyMap luaGroup(const std::string& body, const std::string& extra = "") {
  std::string indented;
  size_t start = 0;
  while (start <= body.size()) {
    const size_t nl = body.find('\n', start);
    indented += "          " + body.substr(start, nl == std::string::npos ? std::string::npos : nl - start) + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return groups(group("    - kind: lua\n" + extra + "      script: |\n" + indented));
}

Decision run(const PolicyGroup& g, const std::string& sql, const std::string& agent = "planner",
             const std::string& conversation = "c-1") {
  const auto analysis = analysis::analyzeUncached(sql);
  RequestContext ctx;
  ctx.user = "agent";
  ctx.database = "analytics";
  ctx.group = g.name();
  ctx.agent_id = agent;
  ctx.conversation_id = conversation;
  return g.evaluate(*analysis, sql, ctx, nullptr);
}

TEST(LuaGuard, NilAllows) {
  const auto m = luaGroup("function check(ctx) return nil end");
  const Decision d = run(*m.at("g"), "SELECT 1");
  EXPECT_FALSE(d.denied);
  EXPECT_TRUE(d.actions.empty());
}

TEST(LuaGuard, DenyWithCodeReasonDetailHint) {
  const auto m = luaGroup(R"(function check(ctx)
  for _, t in ipairs(ctx.tables) do
    if t == "public.salaries" then
      return {action = "deny", code = "HR_ONLY", reason = "salaries is for HR; ask HR instead.",
              detail = "table=" .. t, hint = "SELECT count(*) FROM public.staff"}
    end
  end
end)");
  const Decision d = run(*m.at("g"), "SELECT * FROM public.salaries WHERE id = 1");
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.guard, "lua");
  EXPECT_EQ(d.deny.code, "HR_ONLY");
  EXPECT_EQ(d.deny.sqlstate, "42501");
  EXPECT_EQ(d.deny.message, "salaries is for HR; ask HR instead.");
  EXPECT_EQ(d.deny.hint, "SELECT count(*) FROM public.staff");
  EXPECT_NE(d.deny.detail.find("table=public.salaries"), std::string::npos);
  EXPECT_FALSE(run(*m.at("g"), "SELECT * FROM public.staff").denied);
}

TEST(LuaGuard, WarnIsAWarning) {
  const auto m = luaGroup(R"(function check(ctx)
  if ctx.limit == nil then return {action = "warn", reason = "add a LIMIT next time"} end
end)");
  const Decision d = run(*m.at("g"), "SELECT * FROM t WHERE a = 1");
  EXPECT_FALSE(d.denied);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0].code, "SCRIPT_WARNING");
  EXPECT_EQ(d.warnings[0].message, "add a LIMIT next time");
  EXPECT_TRUE(run(*m.at("g"), "SELECT * FROM t WHERE a = 1 LIMIT 5").warnings.empty());
}

TEST(LuaGuard, ExplicitAllowTable) {
  const auto m = luaGroup("function check(ctx) return {action = 'allow'} end");
  EXPECT_FALSE(run(*m.at("g"), "SELECT 1").denied);
}

TEST(LuaGuard, CtxCarriesEverything) {
  const auto m = luaGroup(R"(function check(ctx)
  local s = ctx.statements[1]
  return {action = "deny", code = "ECHO", reason = table.concat({
    ctx.user, ctx.database, ctx.group, ctx.agent_id, ctx.conversation_id, ctx.query_intent,
    table.concat(ctx.kinds, ","), table.concat(ctx.tables, ","), tostring(ctx.has_predicate["t"]),
    tostring(ctx.has_predicate["u"]), tostring(ctx.limit), ctx.fingerprint ~= "" and "fp" or "nofp",
    s.command, tostring(#ctx.sql)}, "|")}
end)");
  const std::string sql = "SELECT * FROM t JOIN u ON true WHERE t.a = 1 LIMIT 7";
  const Decision d = run(*m.at("g"), sql, "planner", "c-42");
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.message, "agent|analytics|g|planner|c-42|lookup|select|t,u|true|false|7|fp|SELECT|" +
                                std::to_string(sql.size()));
}

TEST(LuaGuard, BudgetCountersInCtx) {
  const auto m = groups(group(R"(    - kind: budget
      max_statements: 10
    - kind: lua
      script: |
        function check(ctx)
          if ctx.budget and ctx.budget.statements >= 2 then
            return {action = "warn", reason = "used " .. ctx.budget.statements}
          end
        end
)"));
  const PolicyGroup& g = *m.at("g");
  budgets::BudgetLedger ledger;
  RequestContext ctx;
  ctx.user = "agent";
  ctx.conversation_id = "c";
  ctx.budgets = &ledger;
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(g);
  ASSERT_NE(bg, nullptr);
  const auto analysis = analysis::analyzeUncached("SELECT 1");
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(g.evaluate(*analysis, "SELECT 1", ctx, nullptr).warnings.empty());
    EXPECT_EQ(ledger.admit(*bg, ledger.keyFor(ctx)).kind,
              budgets::BudgetLedger::Admission::Kind::kAdmitted);
  }
  const Decision d = g.evaluate(*analysis, "SELECT 1", ctx, nullptr);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0].message, "used 2");
}

TEST(LuaGuard, InfiniteLoopStoppedAndStateStaysHealthy) {
  const auto m = luaGroup(R"(function check(ctx)
  if ctx.sql == "SELECT 1" then while true do end end
  return {action = "deny", code = "SECOND", reason = "second call ran"}
end)", "      instruction_limit: 100000\n");
  const PolicyGroup& g = *m.at("g");
  const auto t0 = agent_test::nowMs();
  const Decision d = run(g, "SELECT 1");
  const auto elapsed = agent_test::nowMs() - t0;
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "SCRIPT_FAILED");
  EXPECT_EQ(d.deny.sqlstate, "58000");
  EXPECT_EQ(d.deny.message.find("instruction"), std::string::npos) << "details belong in the log";
  EXPECT_LT(elapsed, 2000);
  for (int i = 0; i < 3; ++i) {
    const Decision next = run(g, "SELECT 2");
    ASSERT_TRUE(next.denied);
    EXPECT_EQ(next.deny.code, "SECOND");
  }
}

TEST(LuaGuard, PcallCannotSwallowTheInstructionLimit) {
  const auto m = luaGroup(R"(function check(ctx)
  while true do pcall(function() while true do end end) end
end)", "      instruction_limit: 50000\n");
  const Decision d = run(*m.at("g"), "SELECT 1");
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "SCRIPT_FAILED");
}

TEST(LuaGuard, PcallCannotHideALimitAndReturnAllow) {
  const auto m = luaGroup(R"(function check(ctx)
  pcall(function() while true do end end)
  return nil
end)", "      instruction_limit: 50000\n");
  EXPECT_TRUE(run(*m.at("g"), "SELECT 1").denied);
}

TEST(LuaGuard, SandboxHasNoOsIoRequireLoadDebug) {
  const auto m = luaGroup(R"(function check(ctx)
  if ctx.sql == "SELECT 'os'" then os.execute("touch /tmp/pgw-lua-escape") end
  if ctx.sql == "SELECT 'io'" then io.open("/etc/passwd") end
  if ctx.sql == "SELECT 'require'" then require("os") end
  if ctx.sql == "SELECT 'load'" then load("return 1")() end
  if ctx.sql == "SELECT 'dofile'" then dofile("/etc/passwd") end
  if ctx.sql == "SELECT 'debug'" then debug.getinfo(1) end
  if ctx.sql == "SELECT 'dump'" then string.dump(check) end
  if ctx.sql == "SELECT 'gc'" then setmetatable({}, {__gc = function() end}) end
  if ctx.sql == "SELECT 'cg'" then collectgarbage() end
  return {action = "deny", code = "REACHED_END", reason = "end"}
end)");
  for (const char* what : {"os", "io", "require", "load", "dofile", "debug", "dump", "gc", "cg"}) {
    const Decision d = run(*m.at("g"), std::string("SELECT '") + what + "'");
    ASSERT_TRUE(d.denied) << what;
    EXPECT_EQ(d.deny.code, "SCRIPT_FAILED") << what;
    EXPECT_EQ(d.deny.message.find("nil value"), std::string::npos) << what;
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/pgw-lua-escape"));
  EXPECT_EQ(run(*m.at("g"), "SELECT 'other'").deny.code, "REACHED_END");
}

TEST(LuaGuard, SafeLibrariesWork) {
  const auto m = luaGroup(R"(function check(ctx)
  local parts = {}
  for w in string.gmatch("a b c", "%a") do parts[#parts + 1] = w:upper() end
  table.sort(parts, function(x, y) return x > y end)
  return {action = "deny", code = "LIBS", reason = table.concat(parts) .. math.floor(3.7) .. utf8.char(72) ..
          select("#", 1, 2) .. tostring(setmetatable({}, {__tostring = function() return "mt" end}))}
end)");
  EXPECT_EQ(run(*m.at("g"), "SELECT 1").deny.message, "CBA3H2mt");
}

TEST(LuaGuard, MemoryLimitStopsAHungryScript) {
  const auto m = luaGroup(R"(function check(ctx)
  if ctx.sql == "SELECT 'rep'" then local s = string.rep("x", 64 * 1024 * 1024) end
  if ctx.sql == "SELECT 'tbl'" then local t = {} for i = 1, 1e9 do t[i] = {i} end end
  if ctx.sql == "SELECT 'keep'" then hoard = hoard or {} for i = 1, 1e9 do hoard[#hoard + 1] = i end end
  return {action = "deny", code = "FINE", reason = "fine"}
end)", "      memory_limit: 1MiB\n      instruction_limit: 100000000\n");
  const PolicyGroup& g = *m.at("g");
  const auto* lua = static_cast<const LuaGuard*>(g.guards()[0].get());
  for (const char* what : {"rep", "tbl", "keep"}) {
    const Decision d = run(g, std::string("SELECT '") + what + "'");
    ASSERT_TRUE(d.denied) << what;
    EXPECT_EQ(d.deny.code, "SCRIPT_FAILED") << what;
    EXPECT_LT(lua->memoryInUse(), 3u << 20) << what;
    EXPECT_EQ(run(g, "SELECT 'ok'").deny.code, "FINE") << "state unusable after " << what;
  }
}

TEST(LuaGuard, BadReturnsFail) {
  const auto m = luaGroup(R"(function check(ctx)
  if ctx.sql == "SELECT 1" then return 42 end
  if ctx.sql == "SELECT 2" then return {action = "maybe"} end
  if ctx.sql == "SELECT 3" then return {action = "deny", code = "lower_case"} end
  if ctx.sql == "SELECT 4" then return {action = "deny", reason = {}} end
  if ctx.sql == "SELECT 5" then return {} end
  if ctx.sql == "SELECT 6" then error("boom: secret detail") end
  return {action = "deny", reason = "no code given"}
end)");
  for (int i = 1; i <= 6; ++i) {
    const Decision d = run(*m.at("g"), "SELECT " + std::to_string(i));
    ASSERT_TRUE(d.denied) << i;
    EXPECT_EQ(d.deny.code, "SCRIPT_FAILED") << i;
    EXPECT_EQ(d.deny.message.find("secret"), std::string::npos);
  }
  const Decision d = run(*m.at("g"), "SELECT 7");
  EXPECT_EQ(d.deny.code, "SCRIPT_DENIED");
  EXPECT_EQ(d.deny.message, "no code given");
}

TEST(LuaGuard, FailBehaviorAllow) {
  const auto m = luaGroup("function check(ctx) error('down') end", "      fail_behavior: allow\n");
  const Decision d = run(*m.at("g"), "SELECT 1");
  EXPECT_FALSE(d.denied);
  EXPECT_TRUE(d.actions.empty());
}

TEST(LuaGuard, WarnOnlyActionTurnsDenyIntoWarning) {
  const auto m = luaGroup("function check(ctx) return {action='deny', code='NOPE', reason='no'} end",
                          "      action: warn\n");
  const Decision d = run(*m.at("g"), "SELECT 1");
  EXPECT_FALSE(d.denied);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0].code, "NOPE");
}

TEST(LuaGuard, GroupReasonOverridesApply) {
  const auto m = groups(R"(g:
  reasons:
    HR_ONLY: "Operator text for {detail}."
  guards:
    - kind: lua
      script: "function check(ctx) return {action='deny', code='HR_ONLY', reason='script text', detail='x'} end"
)");
  EXPECT_EQ(run(*m.at("g"), "SELECT 1").deny.message, "Operator text for x.");
}

TEST(LuaGuardConfig, InlineCompileErrorNamesConfigLineAndScriptLine) {
  const std::string yaml = "g:\n  guards:\n    - kind: lua\n      script: |\n        function check(ctx)\n"
                           "          return {action = \n        end end\n";
  try {
    (void)groups(yaml);
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "groups.g.guards[0].script");
    EXPECT_EQ(e.line(), 7) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
}

TEST(LuaGuardConfig, FileCompileErrorNamesFileAndLine) {
  agent_test::TempDir dir;
  const auto file = dir.path() / "policy.lua";
  std::ofstream(file) << "-- policy\nfunction check(ctx)\n  local x = = 1\nend\n";
  try {
    (void)groups("g:\n  guards:\n    - kind: lua\n      file: " + file.string() + "\n");
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find("line 3"), std::string::npos) << what;
    EXPECT_EQ(e.key(), "groups.g.guards[0].file");
    EXPECT_EQ(e.line(), 4);
  }
  std::ofstream(file, std::ios::trunc) << "function check(ctx)\n  return {action='deny', code='FROM_FILE', reason='f'}\nend\n";
  const auto m = groups("g:\n  guards:\n    - kind: lua\n      file: " + file.string() + "\n");
  EXPECT_EQ(run(*m.at("g"), "SELECT 1").deny.code, "FROM_FILE");
}

TEST(LuaGuardConfig, ScriptFileMustBeABoundedRegularFile) {
  // A FIFO would stall the config load for ever and /dev/zero would eat memory: both are refused
  // at once, and so is a script over 1 MiB.
  agent_test::TempDir dir;
  const auto fifo = dir.path() / "policy.lua";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto big = dir.path() / "big.lua";
  std::ofstream(big) << "-- " << std::string(config::kMaxScriptFileBytes, 'x') << "\nfunction check(ctx) end\n";
  for (const std::string& file : {fifo.string(), std::string("/dev/zero"), big.string()}) {
    try {
      (void)groups("g:\n  guards:\n    - kind: lua\n      file: " + file + "\n");
      ADD_FAILURE() << "loaded " << file;
    } catch (const config::ConfigError& e) {
      EXPECT_EQ(e.key(), "groups.g.guards[0].file");
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  }
}

TEST(LuaGuardConfig, OtherErrors) {
  auto fails = [](const std::string& guard, const std::string& needle) {
    try {
      (void)groups("g:\n  guards:\n    - kind: lua\n" + guard);
      ADD_FAILURE() << "no error for " << guard;
    } catch (const config::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  fails("      script: \"x = 1\"\n", "no function check");
  fails("      script: \"while true do end\"\n", "limit");
  fails("      script: \"function check() end\"\n      file: /x.lua\n", "not both");
  fails("      fail_behavior: allow\n", "script");
  fails("      script: \"function check() end\"\n      fail_behavior: maybe\n", "deny or allow");
  fails("      script: \"function check() end\"\n      bogus: 1\n", "bogus");
  fails("      file: /nonexistent/p.lua\n", "cannot read");
  fails("      script: \"\\x1bLua\"\n", "");  // bytecode is refused (text chunks only)
}

// Every call of check(ctx) is reported to the chain's observer: ok (whatever the verdict), a
// timeout for the instruction limit, a failure for errors, the memory limit and bad returns.
struct CallLog final : GuardObserver {
  std::vector<CallResult> results;
  int lua_guard_timings = 0;
  void guardEvaluated(std::string_view kind, std::chrono::nanoseconds) override {
    if (kind == "lua") ++lua_guard_timings;
  }
  void externalCall(External kind, CallResult result, std::chrono::nanoseconds spent) override {
    EXPECT_EQ(kind, External::kLua);
    EXPECT_GE(spent.count(), 0);
    results.push_back(result);
  }
};

TEST(LuaGuard, CallsReportedToTheObserver) {
  const auto m = luaGroup(R"(function check(ctx)
  if ctx.sql:find("spin") then while true do end end
  if ctx.sql:find("boom") then error("boom") end
  if ctx.sql:find("hungry") then local t = {} for i = 1, 1e8 do t[i] = i end end
  if ctx.sql:find("bad") then return 42 end
  if ctx.sql:find("deny") then return {action = "deny", code = "NO", reason = "no"} end
end)", "      instruction_limit: 10000000\n      memory_limit: 1048576\n");
  const PolicyGroup& g = *m.at("g");
  CallLog log;
  using R = GuardObserver::CallResult;
  for (const char* sql : {"SELECT 'ok'", "SELECT 'deny'", "SELECT 'spin'", "SELECT 'boom'", "SELECT 'hungry'",
                          "SELECT 'bad'"}) {
    const auto analysis = analysis::analyzeUncached(sql);
    RequestContext ctx;
    ctx.user = "agent";
    ctx.observer = &log;
    (void)g.evaluate(*analysis, sql, ctx, nullptr);
  }
  EXPECT_EQ(log.results, (std::vector<R>{R::kOk, R::kOk, R::kTimeout, R::kFailure, R::kFailure, R::kFailure}));
  EXPECT_EQ(log.lua_guard_timings, 6);
}

// ---- session housekeeping (drivers' own SET/SHOW/BEGIN/ROLLBACK/DISCARD/... and empty texts) ----

using agent_test::kHousekeeping;
using agent_test::kJudged;
using agent_test::kLuaBroken;
using agent_test::kLuaDenyAll;
using agent_test::Prepared;
using agent_test::prepare;

class Calls final : public GuardObserver {
 public:
  void guardEvaluated(std::string_view, std::chrono::nanoseconds) override {}
  void externalCall(External, CallResult, std::chrono::nanoseconds) override { ++calls; }
  int calls = 0;
};

TEST(SessionHousekeeping, NotShownToLuaScriptsSoAFailingScriptCannotRefuseIt) {
  for (const std::string& script : {kLuaDenyAll, kLuaBroken}) {
    const auto m = groups("g:\n  guards:\n" + script);
    const PolicyGroup& g = *m.at("g");
    Calls calls;
    for (const auto& sql : kHousekeeping) {
      Prepared r = prepare(sql);
      r.ctx.observer = &calls;
      const Decision d = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
      EXPECT_FALSE(d.denied) << sql << ": " << d.deny.code;
      EXPECT_TRUE(d.actions.empty()) << sql;
    }
    EXPECT_EQ(calls.calls, 0) << "the script never ran";
    for (const auto& sql : kJudged) {
      Prepared r = prepare(sql);
      r.ctx.observer = &calls;
      const Decision d = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
      ASSERT_TRUE(d.denied) << sql;
      EXPECT_EQ(d.deny.code, script == kLuaDenyAll ? "SEEN" : "SCRIPT_FAILED") << sql;
    }
    EXPECT_EQ(calls.calls, static_cast<int>(kJudged.size()));
  }
}

}  // namespace
}  // namespace pgwarden::guards
