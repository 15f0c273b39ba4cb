// PCRE2 behind JsonPattern: the compiled code is read-only and shared across loops; each match
// takes its own match data, and one match context (read-only after start-up) carries the limits.
#include "mcp/json_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

namespace pgwarden::mcp {

struct JsonPattern::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// The limits, set once; pcre2_match only reads a context, so every loop may share it.
pcre2_match_context* limits() {
  static pcre2_match_context* const ctx = [] {
    pcre2_match_context* c = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(c, JsonPattern::kMatchLimit);
    pcre2_set_depth_limit(c, JsonPattern::kDepthLimit);
    pcre2_set_heap_limit(c, JsonPattern::kHeapLimitKib);
    return c;
  }();
  return ctx;
}

std::string errorText(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n > 0 ? std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n))
               : "error " + std::to_string(code);
}

}  // namespace

Result<JsonPattern> JsonPattern::compile(std::string_view source) {
  // ALT_BSUX: ECMAScript's \uXXXX (and \u{...}); DOLLAR_ENDONLY: `$` does not match before a
  // final newline as Perl's does; NEVER_BACKSLASH_C: \C could split a UTF-8 character.
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  pcre2_set_compile_extra_options(cctx, PCRE2_EXTRA_ALT_BSUX);
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                    PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C,
                    &err, &offset, cctx);
  pcre2_compile_context_free(cctx);
  if (!code)
    return Result<JsonPattern>::fail(errorText(err) + " at offset " + std::to_string(offset));
  auto owned = std::make_shared<Code>();
  owned->code = code;
  JsonPattern p;
  p.code_ = std::move(owned);
  p.source_ = std::string(source);
  return p;
}

JsonPattern::Outcome JsonPattern::search(std::string_view subject) const {
  // One match data per thread, kept: a fresh one starts with a small backtracking stack and
  // grows it on every match, which costs fifty times the match itself. Its one offset pair is
  // all a yes or no needs (a match with more groups than pairs still answers >= 0); the stack it
  // keeps is bounded by kHeapLimitKib.
  thread_local const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create(1, nullptr), &pcre2_match_data_free);
  if (!md) return Outcome::kBadSubject;
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()),
                             subject.size(), 0, 0, md.get(), limits());
  if (rc >= 0) return Outcome::kMatch;
  switch (rc) {
    case PCRE2_ERROR_NOMATCH:
      return Outcome::kNoMatch;
    case PCRE2_ERROR_MATCHLIMIT:
    case PCRE2_ERROR_DEPTHLIMIT:
    case PCRE2_ERROR_HEAPLIMIT:
      return Outcome::kLimit;
    default:
      return Outcome::kBadSubject;
  }
}

}  // namespace pgwarden::mcp
