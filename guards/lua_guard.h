// `kind: lua`: an operator's `function check(ctx) ... end` (inline or in a file), run in a
// sandboxed Lua 5.4 state per script with an instruction limit and a memory cap per call. Any
// failure applies the guard's fail_behavior with a generic reason; details go to the log only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.h"
#include "guards/guard.h"

namespace pgwarden::guards {

namespace lua_codes {
inline constexpr std::string_view kScriptDenied = "SCRIPT_DENIED";    // a deny without a code
inline constexpr std::string_view kScriptWarning = "SCRIPT_WARNING";  // a warn without a code
inline constexpr std::string_view kScriptFailed = "SCRIPT_FAILED";    // error, limit, bad return
}  // namespace lua_codes

struct LuaGuardOptions {
  std::string source;             // the script text
  std::string chunk_name;         // for messages: the file, or the config key of an inline script
  bool from_file = false;
  int config_line = 0;            // inline: config line of the script's first line
  bool fail_open = false;         // fail_behavior: allow
  int64_t instruction_limit = 1'000'000;
  size_t memory_limit = 8u << 20; // bytes the script may hold, on top of the compiled script
};

class LuaGuard final : public Guard {
 public:
  // Compiles and runs the chunk (which must define `check`). On failure returns an error naming
  // the chunk and the script line ("file.lua:3: ..."), in `error_line` the script line (0 unknown).
  static Result<std::unique_ptr<LuaGuard>> create(LuaGuardOptions opts, int* error_line = nullptr);
  ~LuaGuard() override;

  std::string_view kind() const override { return "lua"; }
  std::vector<std::string_view> codes() const override { return {"*"}; }
  // Runs check(ctx); a text of session housekeeping only (isSessionHousekeeping) passes without
  // running the script.
  GuardResult checkText(const GuardInput& in) const override;

  // Bytes the state holds now (for tests and metrics).
  size_t memoryInUse() const;

  struct Sandbox;  // the state and its limits (lua_guard.cpp)

 private:
  explicit LuaGuard(LuaGuardOptions opts);
  GuardResult failure(const GuardInput& in, const std::string& why) const;

  LuaGuardOptions opts_;
  // The state is reused across calls. Guards are shared and const; the loop is single-threaded,
  // but the lock keeps a second caller (a test, a future worker) from entering one state twice.
  mutable std::mutex mu_;
  std::unique_ptr<Sandbox> sb_;
};

std::unique_ptr<Guard> makeLuaGuard(const YAML::Node& node, const std::string& path, const GroupSettings& group);

}  // namespace pgwarden::guards
