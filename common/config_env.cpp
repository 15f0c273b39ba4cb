// Environment interpolation of config values: one walk that computes every scalar's new text from
// its text in the file, then one pass that writes them, so an aliased node is expanded only once.
#include "common/config_env.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "common/config_util.h"

namespace pgwarden::config {

namespace {

bool isNameStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool isNameChar(char c) { return isNameStart(c) || (c >= '0' && c <= '9'); }

// Policy: what a user may run and who counts as whom. A value here comes from the file only.
bool isPolicyPath(const std::string& path) {
  const auto under = [&path](const std::string& prefix) {
    return path == prefix || path.rfind(prefix + ".", 0) == 0 || path.rfind(prefix + "[", 0) == 0;
  };
  if (under("groups") || under("tools") || under("admin_users") || under("stats_users")) {
    return true;
  }
  if (path.rfind("users[", 0) == 0) {
    const auto dot = path.find("].");
    if (dot != std::string::npos) {
      const std::string key = path.substr(dot + 2);
      return key == "group" || key == "method";
    }
  }
  return false;
}

class EnvWalk {
 public:
  explicit EnvWalk(const EnvLookup& lookup) : lookup_(lookup) {}

  void walk(const YAML::Node& node, const std::string& path, int depth) {
    // rejectDuplicateKeys has bounded depth and aliases before this runs; this only guards itself.
    if (depth > 64) fail(node, path, "nested too deeply");
    if (node.IsMap()) {
      for (const auto& kv : node) {
        const std::string key = kv.first.Scalar();
        if (key.find("${") != std::string::npos) {
          fail(kv.first, path.empty() ? key : path + "." + key,
               "a key is never expanded: '${' is allowed in values only");
        }
        walk(kv.second, path.empty() ? key : path + "." + key, depth + 1);
      }
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        walk(node[i], path + "[" + std::to_string(i) + "]", depth + 1);
      }
    } else if (node.IsScalar()) {
      scalar(node, path);
    }
  }

  void apply() {
    for (auto& [node, text] : changes_) node = text;
  }

 private:
  void scalar(const YAML::Node& node, const std::string& path) {
    const std::string& in = node.Scalar();
    if (in.find("${") == std::string::npos) return;
    const bool policy = isPolicyPath(path);
    std::string out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] != '$') {
        out += in[i];
        continue;
      }
      if (in.compare(i, 3, "$${") == 0) {  // the escape: a literal "${"
        out += "${";
        i += 2;
        continue;
      }
      if (in.compare(i, 2, "${") != 0) {
        out += '$';
        continue;
      }
      const size_t close = in.find('}', i + 2);
      const std::string name =
          close == std::string::npos ? std::string() : in.substr(i + 2, close - i - 2);
      if (name.empty() || !isNameStart(name[0]) ||
          !std::all_of(name.begin(), name.end(), isNameChar)) {
        fail(node, path,
             "'${' starts an environment reference ${NAME} (NAME: letters, digits, '_'); write "
             "'$${' for a literal '${'");
      }
      if (policy) {
        fail(node, path,
             "${" + name +
                 "}: environment variables are not expanded here, where a value from "
                 "outside the file would change the policy; write the value itself");
      }
      const auto value = lookup_(name);
      if (!value) fail(node, path, "environment variable " + name + " is not set");
      out += *value;
      i = close;
    }
    changes_.emplace_back(node, std::move(out));
  }

  const EnvLookup& lookup_;
  std::vector<std::pair<YAML::Node, std::string>> changes_;
};

}  // namespace

std::optional<std::string> processEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

void interpolateEnv(YAML::Node& root, const EnvLookup& lookup) {
  EnvWalk walk(lookup);
  walk.walk(root, "", 0);
  walk.apply();
}

}  // namespace pgwarden::config
