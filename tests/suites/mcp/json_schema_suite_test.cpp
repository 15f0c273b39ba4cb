// The official JSON Schema Test Suite against the tool-schema subset: every group whose schema
// compile() accepts must get the suite's verdict on every instance; groups using keywords outside
// the subset are counted as skipped, and enough cases must run that the test cannot pass empty.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "mcp/json_schema.h"

namespace pgwarden::mcp {
namespace {

namespace fs = std::filesystem;

// The suite's files for the subset's keywords. The optional/ files hold the assertion tests of
// formats in every draft (the top-level format file of 2019-09 and later treats formats as
// annotations, where anything is valid, which the subset deliberately does not: it asserts them,
// so that file is left out), and the big-number and 1.0-is-an-integer tests of type and bounds.
const char* const kFiles[] = {
    "type.json",
    "required.json",
    "properties.json",
    "additionalProperties.json",
    "enum.json",
    "const.json",
    "minimum.json",
    "maximum.json",
    "exclusiveMinimum.json",
    "exclusiveMaximum.json",
    "multipleOf.json",
    "minLength.json",
    "maxLength.json",
    "pattern.json",
    "items.json",
    "minItems.json",
    "maxItems.json",
    "uniqueItems.json",
    "default.json",
    "optional/bignum.json",
    "optional/zeroTerminatedFloats.json",
    "optional/format/date.json",
    "optional/format/date-time.json",
    "optional/format/time.json",
    "optional/format/email.json",
    "optional/format/uuid.json",
};

// Debian 12's draft7 suite holds 226 cases in these files, 188 of them in groups the subset
// compiles (the other 38 use patternProperties, boolean schemas, tuple items or schema-valued
// additionalProperties). A run far below that means the suite was not read.
constexpr int kMinCasesRun = 150;

// The newest draft present: the subset follows 2020-12, and the keywords it supports mean the
// same in draft7 except array-form items, which compile() refuses.
fs::path newestDraft(const fs::path& suite) {
  for (const char* d : {"draft2020-12", "draft2019-09", "draft7"})
    if (fs::exists(suite / "tests" / d)) return suite / "tests" / d;
  return {};
}

TEST(JsonSchemaSuite, AgreesWithTheOfficialTestSuite) {
  const std::string suiteDir = PGW_JSON_SCHEMA_TEST_SUITE_DIR;
  if (suiteDir.empty() || !fs::exists(suiteDir))
    GTEST_FAIL() << "the JSON Schema Test Suite was not found at build time; install the Debian "
                    "package json-schema-test-suite (scripts/deps does) and re-run cmake";
  fs::path draft = newestDraft(suiteDir);
  ASSERT_FALSE(draft.empty()) << "no draft7 or newer directory under " << suiteDir << "/tests";

  int ran = 0, skippedCases = 0, skippedGroups = 0, files = 0;
  for (const char* name : kFiles) {
    fs::path file = draft / name;
    if (!fs::exists(file)) continue;  // uuid's file is newer than draft7
    ++files;
    std::ifstream in(file);
    Json groups = Json::parse(in);
    for (const auto& group : groups) {
      auto schema = JsonSchema::compile(group.at("schema"));
      if (!schema.ok()) {
        ++skippedGroups;
        skippedCases += static_cast<int>(group.at("tests").size());
        continue;
      }
      for (const auto& t : group.at("tests")) {
        ++ran;
        bool valid = schema->validate(t.at("data")).empty();
        EXPECT_EQ(valid, t.at("valid").get<bool>())
            << name << " / " << group.at("description").get<std::string>() << " / "
            << t.at("description").get<std::string>() << ": data " << t.at("data").dump();
      }
    }
  }
  std::cout << "[ suite    ] " << draft.filename().string() << ": " << files << " files, " << ran
            << " cases ran, " << skippedCases << " skipped in " << skippedGroups
            << " groups outside the subset\n";
  EXPECT_GT(ran, kMinCasesRun) << "too few suite cases ran; is the suite complete?";
}

}  // namespace
}  // namespace pgwarden::mcp
