// A unit test that needs a program from outside the build (initdb and pg_ctl, promtool,
// prometheus) skips itself where the program is missing, so that a developer without it still
// runs the rest. In CI a skip would hide a test that never ran: with CI or
// PGWARDEN_REQUIRE_TOOLS set to 1 (or true) in the environment, as scripts/test sets it, a
// missing program fails the test instead (scripts/deps installs every one).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace pgwarden_test {

inline bool toolsRequired() {
  for (const char* name : {"PGWARDEN_REQUIRE_TOOLS", "CI"}) {
    const char* v = std::getenv(name);
    std::string value = v ? v : "";
    for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (value == "1" || value == "true") return true;
  }
  return false;
}

}  // namespace pgwarden_test

// Skips the current test (or fixture SetUp) for want of a tool; fails it where tools are required.
#define PGW_MISSING_TOOL(what)                                                                  \
  do {                                                                                          \
    if (::pgwarden_test::toolsRequired()) {                                                     \
      GTEST_FAIL() << what << " (a missing tool fails here: CI or PGWARDEN_REQUIRE_TOOLS is set;" \
                   << " scripts/deps installs it)";                                             \
    }                                                                                           \
    GTEST_SKIP() << what;                                                                       \
  } while (0)
