// The Lua guard: a sandboxed Lua 5.4 state per script. Only the safe base functions and the
// string, table, math and utf8 libraries exist; text chunks only (no bytecode); a count hook
// enforces the instruction limit and a custom allocator the memory cap. Once a limit is hit the
// hook fires on every instruction, so a script cannot pcall its way past it.
//
// Lua raises errors with longjmp: every call that can raise runs inside lua_pcall, and the C
// functions below it hold no C++ objects with destructors.
#include "guards/lua_guard.h"

#include <lua.hpp>
#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <cstdlib>

#include "common/log_text.h"
#include "common/config_util.h"
#include "guards/agent_context.h"

namespace pgwarden::guards {

namespace {

constexpr int kHookEvery = 1000;     // instructions between hook calls
constexpr size_t kMaxReasonBytes = 2000;
constexpr size_t kMaxDetailBytes = 8000;

}  // namespace

struct LuaGuard::Sandbox {
  lua_State* L = nullptr;
  size_t used = 0;
  size_t limit = SIZE_MAX;       // absolute cap on `used` while a call runs
  bool memory_hit = false;
  int64_t instructions = 0;
  int64_t instruction_limit = 0;
  bool killed = false;           // a limit was hit: every instruction raises from now on
  int check_ref = LUA_NOREF;
  size_t baseline = 0;           // bytes held by the compiled script and its globals

  ~Sandbox();
};

namespace {

using Sandbox = LuaGuard::Sandbox;

void* sandboxAlloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* sb = static_cast<LuaGuard::Sandbox*>(ud);
  const size_t old = ptr ? osize : 0;  // without ptr, osize encodes the object type
  if (nsize == 0) {
    if (ptr) {
      sb->used -= old;
      std::free(ptr);
    }
    return nullptr;
  }
  if (nsize > old && sb->used - old + nsize > sb->limit) {
    sb->memory_hit = true;
    if (!sb->killed && sb->L) {
      sb->killed = true;
      // lua_sethook may be called at any point (it is signal-safe by design).
      lua_sethook(sb->L, lua_gethook(sb->L), LUA_MASKCOUNT, 1);
    }
    return nullptr;
  }
  void* p = std::realloc(ptr, nsize);
  if (!p) return nullptr;
  sb->used = sb->used - old + nsize;
  return p;
}

Sandbox* sandboxOf(lua_State* L) {
  void* ud = nullptr;
  lua_getallocf(L, &ud);
  return static_cast<Sandbox*>(ud);
}

void countHook(lua_State* L, lua_Debug*) {
  Sandbox* sb = sandboxOf(L);
  sb->instructions += sb->killed ? 1 : kHookEvery;
  if (sb->killed || sb->instructions > sb->instruction_limit) {
    if (!sb->killed) {
      sb->killed = true;
      lua_sethook(L, countHook, LUA_MASKCOUNT, 1);
    }
    luaL_error(L, sb->memory_hit ? "memory limit exceeded" : "instruction limit exceeded");
  }
}

int panicHandler(lua_State* L) {
  const char* msg = lua_tostring(L, -1);
  spdlog::critical("lua guard: unprotected error: {}", msg ? msg : "?");
  std::abort();
}

void setString(lua_State* L, const char* key, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  lua_setfield(L, -2, key);
}

void pushStringList(lua_State* L, const std::vector<std::string>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushlstring(L, v[i].data(), v[i].size());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

void pushContext(lua_State* L, const ContextDoc& d) {
  lua_createtable(L, 0, 24);
  setString(L, "sql", d.sql);
  setString(L, "fingerprint", d.fingerprint);
  setString(L, "user", d.user);
  setString(L, "database", d.database);
  setString(L, "group", d.group);
  setString(L, "agent_id", d.agent_id);
  setString(L, "conversation_id", d.conversation_id);
  setString(L, "query_intent", d.query_intent);
  setString(L, "query_intent_sent", d.query_intent_sent);
  setString(L, "query_intent_inferred", d.query_intent_inferred);
  setString(L, "application_name", d.application_name);
  setString(L, "client_addr", d.client_addr);
  lua_pushboolean(L, d.extended);
  lua_setfield(L, -2, "extended");
  pushStringList(L, d.kinds);
  lua_setfield(L, -2, "kinds");
  pushStringList(L, d.tables);
  lua_setfield(L, -2, "tables");
  pushStringList(L, d.functions);
  lua_setfield(L, -2, "functions");
  lua_createtable(L, 0, static_cast<int>(d.has_predicate.size()));
  for (auto it = d.has_predicate.begin(); it != d.has_predicate.end(); ++it) {
    lua_pushlstring(L, it->first.data(), it->first.size());
    lua_pushboolean(L, it->second);
    lua_rawset(L, -3);
  }
  lua_setfield(L, -2, "has_predicate");
  if (d.limit) {
    lua_pushinteger(L, *d.limit);
    lua_setfield(L, -2, "limit");
  }
  lua_createtable(L, static_cast<int>(d.statements.size()), 0);
  for (size_t i = 0; i < d.statements.size(); ++i) {
    const ContextStatement& s = d.statements[i];
    lua_createtable(L, 0, 6);
    setString(L, "kind", s.kind);
    setString(L, "command", s.command);
    setString(L, "intent", s.intent);
    if (s.limit) {
      lua_pushinteger(L, *s.limit);
      lua_setfield(L, -2, "limit");
    }
    pushStringList(L, s.functions);
    lua_setfield(L, -2, "functions");
    lua_createtable(L, static_cast<int>(s.tables.size()), 0);
    for (size_t k = 0; k < s.tables.size(); ++k) {
      lua_createtable(L, 0, 3);
      setString(L, "name", s.tables[k].name);
      lua_pushboolean(L, s.tables[k].has_predicate);
      lua_setfield(L, -2, "has_predicate");
      lua_pushboolean(L, s.tables[k].written);
      lua_setfield(L, -2, "written");
      lua_rawseti(L, -2, static_cast<lua_Integer>(k + 1));
    }
    lua_setfield(L, -2, "tables");
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "statements");
  if (d.has_budget) {
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, d.budget_statements);
    lua_setfield(L, -2, "statements");
    lua_pushinteger(L, d.budget_denied);
    lua_setfield(L, -2, "denied");
    lua_pushinteger(L, d.budget_rows);
    lua_setfield(L, -2, "rows");
    lua_setfield(L, -2, "budget");
  }
}

// Runs in protected mode: (lightuserdata ContextDoc, integer check_ref) -> check(ctx)'s result.
int runCheck(lua_State* L) {
  const auto* doc = static_cast<const ContextDoc*>(lua_touserdata(L, 1));
  const auto ref = static_cast<int>(lua_tointeger(L, 2));
  lua_settop(L, 0);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  pushContext(L, *doc);
  lua_call(L, 1, 1);
  return 1;
}

// setmetatable without __gc: a finalizer would run Lua code whenever the collector gets to it,
// outside any call's limits. (A __gc added to the metatable later never marks the object.)
int safeSetmetatable(lua_State* L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    lua_rawget(L, 2);
    if (!lua_isnil(L, -1)) return luaL_error(L, "__gc metamethods are not allowed here");
    lua_pop(L, 1);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

// Limits reset for a new call.
void arm(Sandbox& sb, size_t memory_limit, int64_t instruction_limit) {
  sb.instructions = 0;
  sb.instruction_limit = instruction_limit;
  sb.killed = false;
  sb.memory_hit = false;
  sb.limit = sb.baseline + memory_limit;
  lua_sethook(sb.L, countHook, LUA_MASKCOUNT, kHookEvery);
}

void disarm(Sandbox& sb) {
  lua_sethook(sb.L, nullptr, 0, 0);
  sb.limit = SIZE_MAX;
}

// The field `key` of the table at `idx` when it is a string (no metamethods run); nullopt when
// absent; sets `bad` when present with another type.
std::optional<std::string> stringField(lua_State* L, int idx, const char* key, bool& bad) {
  lua_pushstring(L, key);
  lua_rawget(L, idx);
  std::optional<std::string> out;
  const int t = lua_type(L, -1);
  if (t == LUA_TSTRING) {
    size_t len = 0;
    const char* s = lua_tolstring(L, -1, &len);
    out = std::string(s, len);
  } else if (t != LUA_TNIL) {
    bad = true;
  }
  lua_pop(L, 1);
  return out;
}

bool validCode(const std::string& code) {
  if (code.empty() || code.size() > 64 || !std::isupper(static_cast<unsigned char>(code[0]))) return false;
  for (char c : code) {
    if (!std::isupper(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

// Cuts at a UTF-8 boundary.
std::string cut(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s;
}

int scriptLine(const std::string& message) {
  // "<chunk>:<line>: <text>"; the chunk may itself hold ':' only in odd paths.
  for (size_t i = 0; i < message.size(); ++i) {
    if (message[i] != ':') continue;
    size_t j = i + 1;
    while (j < message.size() && std::isdigit(static_cast<unsigned char>(message[j]))) ++j;
    if (j > i + 1 && j < message.size() && message[j] == ':') return std::atoi(message.c_str() + i + 1);
  }
  return 0;
}

}  // namespace

LuaGuard::Sandbox::~Sandbox() {
  if (!L) return;
  // Closing runs no script code (no finalizers can exist), but keep a bound on it regardless.
  arm(*this, 1u << 20, 1'000'000);
  limit = SIZE_MAX;
  lua_close(L);
}

LuaGuard::LuaGuard(LuaGuardOptions opts) : opts_(std::move(opts)), sb_(std::make_unique<Sandbox>()) {}

LuaGuard::~LuaGuard() = default;

Result<std::unique_ptr<LuaGuard>> LuaGuard::create(LuaGuardOptions opts, int* error_line) {
  if (error_line) *error_line = 0;
  std::unique_ptr<LuaGuard> g(new LuaGuard(std::move(opts)));
  Sandbox& sb = *g->sb_;
  sb.L = lua_newstate(sandboxAlloc, &sb);
  if (!sb.L) return Result<std::unique_ptr<LuaGuard>>::fail("cannot create a Lua state");
  lua_State* L = sb.L;
  lua_atpanic(L, panicHandler);
  luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
  lua_settop(L, 0);
  // No file, process or loader access; no way to turn text or bytes into code at run time.
  for (const char* name : {"dofile", "loadfile", "load", "loadstring", "require", "collectgarbage", "print",
                           "module", "setfenv", "getfenv", "newproxy"}) {
    lua_pushnil(L);
    lua_setglobal(L, name);
  }
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_settop(L, 0);
  lua_getglobal(L, "setmetatable");
  lua_pushcclosure(L, safeSetmetatable, 1);
  lua_setglobal(L, "setmetatable");

  const std::string chunk = (g->opts_.from_file ? "@" : "=") + g->opts_.chunk_name;
  sb.baseline = sb.used;
  arm(sb, g->opts_.memory_limit, g->opts_.instruction_limit);
  int rc = luaL_loadbufferx(L, g->opts_.source.data(), g->opts_.source.size(), chunk.c_str(), "t");
  if (rc == LUA_OK) rc = lua_pcall(L, 0, 0, 0);
  const bool killed = sb.killed;
  disarm(sb);
  if (rc != LUA_OK || killed) {
    std::string msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";
    if (killed && rc == LUA_OK) msg = g->opts_.chunk_name + ": the script's top level hit a limit";
    if (error_line) *error_line = scriptLine(msg);
    return Result<std::unique_ptr<LuaGuard>>::fail(msg);
  }
  lua_getglobal(L, "check");
  if (lua_type(L, -1) != LUA_TFUNCTION) {
    return Result<std::unique_ptr<LuaGuard>>::fail(g->opts_.chunk_name + ": the script defines no function check(ctx)");
  }
  sb.check_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, 0);
  lua_gc(L, LUA_GCCOLLECT);
  sb.baseline = sb.used;
  return Result<std::unique_ptr<LuaGuard>>(std::move(g));
}

size_t LuaGuard::memoryInUse() const {
  std::lock_guard lock(mu_);
  return sb_->used;
}

GuardResult LuaGuard::failure(const GuardInput& in, const std::string& why) const {
  spdlog::warn(
      "lua guard {}: {} (user={} database={} agent_id={} conversation_id={} fingerprint={}); "
      "fail_behavior={}",
      opts_.chunk_name, logsafe(why, kLogMessageMaxBytes), logsafe(in.ctx.user),
      logsafe(in.ctx.database), logsafe(in.ctx.agent_id), logsafe(in.ctx.conversation_id),
      in.analysis.fingerprint_hex, opts_.fail_open ? "allow" : "deny");
  if (opts_.fail_open) return {};
  GuardResult r;
  r.action = Action::kDeny;
  r.code = std::string(lua_codes::kScriptFailed);
  r.sqlstate = "58000";
  r.message =
      "A policy check could not be completed for this statement, so it was not run. Try a simpler "
      "statement, or stop and say that a policy check failed.";
  r.facts.add("next_step", "simplify the statement or stop");
  return r;
}

GuardResult LuaGuard::checkText(const GuardInput& in) const {
  // Session housekeeping (SET, BEGIN, SHOW, DISCARD ...) never reaches the script, as it never
  // reaches a policy service: a failing script must not stop a driver's own set-up statements.
  if (isSessionHousekeeping(in.analysis)) return {};
  const ContextDoc doc = buildContextDoc(in);
  std::lock_guard lock(mu_);
  Sandbox& sb = *sb_;
  lua_State* L = sb.L;
  lua_settop(L, 0);
  arm(sb, opts_.memory_limit, opts_.instruction_limit);
  lua_pushcfunction(L, runCheck);
  lua_pushlightuserdata(L, const_cast<ContextDoc*>(&doc));
  lua_pushinteger(L, sb.check_ref);
  const auto started = std::chrono::steady_clock::now();
  const int rc = lua_pcall(L, 2, 1, 0);
  const auto spent = std::chrono::steady_clock::now() - started;
  const bool killed = sb.killed;
  const bool memory_hit = sb.memory_hit;
  disarm(sb);

  std::string why;
  GuardResult r;
  if (killed) {
    why = memory_hit ? "memory limit exceeded" : "instruction limit exceeded";
  } else if (rc != LUA_OK) {
    why = lua_type(L, -1) == LUA_TSTRING ? std::string("error: ") + lua_tostring(L, -1) : "error";
  } else if (lua_type(L, -1) == LUA_TNIL) {
    // allow
  } else if (lua_type(L, -1) != LUA_TTABLE) {
    why = std::string("check() returned a ") + luaL_typename(L, -1) + ", expected nil or a table";
  } else {
    const int idx = lua_gettop(L);
    bool bad = false;
    const auto action = stringField(L, idx, "action", bad);
    const auto code = stringField(L, idx, "code", bad);
    const auto reason = stringField(L, idx, "reason", bad);
    const auto detail = stringField(L, idx, "detail", bad);
    const auto hint = stringField(L, idx, "hint", bad);
    if (bad) {
      why = "check() returned a field that is not a string";
    } else if (!action || (*action != "allow" && *action != "deny" && *action != "warn")) {
      why = "check() returned an action other than allow, deny or warn";
    } else if (code && !validCode(*code)) {
      why = "check() returned a code that is not UPPER_CASE (at most 64 characters)";
    } else if (*action != "allow") {
      r.action = *action == "deny" ? Action::kDeny : Action::kWarn;
      r.code = code ? *code
                    : std::string(r.action == Action::kDeny ? lua_codes::kScriptDenied : lua_codes::kScriptWarning);
      r.message = reason ? cut(*reason, kMaxReasonBytes)
                         : (r.action == Action::kDeny ? "This statement is not allowed by a policy script."
                                                      : "A policy script flagged this statement.");
      if (detail) r.facts.add("detail", cut(*detail, kMaxDetailBytes));
      if (hint) r.hint = cut(*hint, kMaxReasonBytes);
    }
  }
  lua_settop(L, 0);
  // Garbage from calls is collected incrementally; collect fully when it piles up.
  if (sb.used > sb.baseline + opts_.memory_limit / 2) {
    arm(sb, opts_.memory_limit, opts_.instruction_limit);
    lua_gc(L, LUA_GCCOLLECT);
    disarm(sb);
  }
  if (in.ctx.observer) {
    using R = GuardObserver::CallResult;
    // The instruction limit is the script's time limit; every other problem is a failure.
    const R result = why.empty() ? R::kOk : (killed && !memory_hit) ? R::kTimeout : R::kFailure;
    in.ctx.observer->externalCall(GuardObserver::External::kLua, result, spent);
  }
  if (!why.empty()) return failure(in, why);
  return r;
}

std::unique_ptr<Guard> makeLuaGuard(const YAML::Node& node, const std::string& path, const GroupSettings&) {
  checkGuardKeys(node, path, {"script", "file", "fail_behavior", "instruction_limit", "memory_limit"});
  LuaGuardOptions o;
  const auto script = config::getOptionalString(node, path, "script");
  const auto file = config::getOptionalString(node, path, "file");
  if (script && file) config::fail(node["file"], path + ".file", "give script or file, not both");
  if (!script && !file) config::fail(node, path, "a lua guard needs script (inline) or file");
  const std::string fb = config::getString(node, path, "fail_behavior", "deny");
  if (fb != "deny" && fb != "allow") {
    config::fail(node["fail_behavior"], path + ".fail_behavior", "expected deny or allow, got '" + fb + "'");
  }
  o.fail_open = fb == "allow";
  o.instruction_limit = config::getInt(node, path, "instruction_limit", 1'000'000, 1000, 1'000'000'000);
  o.memory_limit = static_cast<size_t>(config::getSize(node, path, "memory_limit", 8u << 20));
  if (o.memory_limit < (64u << 10) || o.memory_limit > (1ull << 30)) {
    config::fail(node["memory_limit"], path + ".memory_limit", "must be between 64KiB and 1GiB");
  }
  YAML::Node at;
  std::string key;
  if (file) {
    at = node["file"];
    key = path + ".file";
    auto source = config::readSmallFile(*file, config::kMaxScriptFileBytes);
    if (!source) config::fail(at, key, "cannot read the Lua script: " + source.error());
    o.source = std::move(*source);
    o.chunk_name = *file;
    o.from_file = true;
  } else {
    at = node["script"];
    key = path + ".script";
    o.source = *script;
    o.chunk_name = key;
    // A block scalar (`script: |`) starts on the line after its key.
    o.config_line = config::lineOf(at) + (o.source.find('\n') != std::string::npos ? 1 : 0);
  }
  int line = 0;
  const int config_line = o.config_line;
  const bool from_file = o.from_file;
  const std::string name = o.chunk_name;
  auto guard = LuaGuard::create(std::move(o), &line);
  if (!guard.ok()) {
    if (from_file) {
      config::fail(at, key, "Lua script " + name + (line > 0 ? " line " + std::to_string(line) : std::string()) +
                                " does not compile: " + guard.error());
    }
    const int at_line = line > 0 ? config_line + line - 1 : config::lineOf(at);
    throw config::ConfigError(at_line, key,
                              "Lua script" + (line > 0 ? " line " + std::to_string(line) : std::string()) +
                                  " does not compile: " + guard.error());
  }
  return std::move(guard.value());
}

}  // namespace pgwarden::guards
