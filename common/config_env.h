// `${NAME}` in a config file: environment variables expanded in scalar values, so secrets can come
// from the service's environment (systemd's Environment=/EnvironmentFile=, a container's env).
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <optional>
#include <string>

namespace pgwarden::config {

// Looks a variable up; std::nullopt when it is not set. The default reads the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<std::string> processEnv(const std::string& name);

// Expands `${NAME}` (NAME: a letter or '_', then letters, digits, '_') in every scalar value under
// `root`, in place; `$${` is a literal `${`, and any other `$` stays as it is (SCRAM verifiers and
// passwords keep theirs). Keys are never expanded. Refused, as ConfigError naming the line and key:
// a `${` in a key; a `${NAME}` where a value from outside the file would change what the policy
// means (everything under `groups` and `tools`, `users[].group`, `users[].method`, `admin_users`),
// so that the file a reviewer reads is the policy that runs; a variable that is not set; a `${`
// that is not a well-formed reference. Aliased nodes are expanded once, from their text in the
// file. Throws ConfigError; only called while loading config.
void interpolateEnv(YAML::Node& root, const EnvLookup& lookup = processEnv);

}  // namespace pgwarden::config
