// A unit test that needs a program from outside the build (initdb and pg_ctl, promtool,
// prometheus) fails where the program is missing, never skips: a skipped test has not run, and
// scripts/deps installs every one.
#pragma once

#include <gtest/gtest.h>

// Fails the current test (or fixture SetUp) for want of a tool.
#define PGW_MISSING_TOOL(what) GTEST_FAIL() << what << " (scripts/deps installs it)"
