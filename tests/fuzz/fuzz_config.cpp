// libFuzzer target: the daemon's config parser on YAML text. A config that cannot be used is an
// exception at start-up (ConfigFileError); that is the only way out besides a Config.
// The config names no real directory: relative paths resolve under one that does not exist.
#include <exception>

#include "daemon/config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto config = pgwarden::daemon::parseConfig(text, "/nonexistent-pgwarden-fuzz/pgwarden.yaml");
    PGW_FUZZ_CHECK(config != nullptr);
    // Cross-references were checked: every user has a group that exists.
    for (const auto& user : config->users) PGW_FUZZ_CHECK(config->findGroup(user.group) != nullptr);
  } catch (const std::exception&) {
    // Rejected with a message: what --check-config prints.
  }
  return 0;
}
