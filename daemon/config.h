// The configuration file's parser: the YAML text read once, strictly (unknown keys are errors
// with file, line and dotted key), into the immutable Config of config/config.h.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "config/config.h"

namespace pgwarden::daemon {

// A config that cannot be used. what() is "FILE:LINE: key: message" (LINE omitted when unknown).
class ConfigFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads and validates a config file, then checks that this process can open or create the files
// it names (the history file too, which the store only creates later), so that --check-config,
// start-up and reload refuse the same files with the same messages. Throws ConfigFileError.
// Never called on the data path.
std::shared_ptr<const config::Config> loadConfig(const std::string& path);
// Parses and validates text only, without looking at the files it names beyond those parsing
// reads (tests, and `path` is only used in messages and for relative paths).
std::shared_ptr<const config::Config> parseConfig(const std::string& text, const std::string& path);

// Parses "host:port", "[v6]:port", "*:port" (all IPv4 and IPv6) and "localhost:port".
// Returns the addresses it stands for, or an error message.
Result<std::vector<net::ListenAddress>> parseListenAddress(std::string_view text);

}  // namespace pgwarden::daemon
