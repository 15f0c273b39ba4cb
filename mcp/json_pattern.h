// A tool schema's `pattern` (ECMA-262 syntax, as JSON Schema asks) on PCRE2: compiled once at
// config load, then matched per call under a match limit, a depth limit and a heap limit, so a
// pattern that backtracks catastrophically on a model's string costs the loop a bounded moment
// and answers "too complex" instead of stalling every session on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace pgwarden::mcp {

class JsonPattern {
 public:
  // Backtracking steps, nested backtracking points and KiB of backtracking memory one match may
  // use. A value under a pattern is at most json_schema.cpp's 1,024 characters; ordinary patterns
  // match that in up to about 2,000 steps and 2,000 levels ((a|b)*, (\w|-)+), so the limits leave
  // them ten and five times that, and cut a runaway match off within a few milliseconds.
  static constexpr uint32_t kMatchLimit = 20000;
  static constexpr uint32_t kDepthLimit = 10000;
  static constexpr uint32_t kHeapLimitKib = 4096;

  enum class Outcome : uint8_t {
    kMatch,
    kNoMatch,
    kLimit,       // a limit above was reached before the match was decided
    kBadSubject,  // not valid UTF-8 (or another error PCRE2 reports)
  };

  // ECMA-262 as far as PCRE2 goes: \uXXXX escapes, `$` only at the very end, \d and \w ASCII;
  // patterns and subjects are UTF-8. The error says what is wrong and at which offset.
  static Result<JsonPattern> compile(std::string_view source);

  // Whether the pattern matches somewhere in `subject` (JSON Schema's patterns are unanchored).
  Outcome search(std::string_view subject) const;
  const std::string& source() const { return source_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;  // immutable once compiled: shared by every loop
  std::string source_;
};

}  // namespace pgwarden::mcp
