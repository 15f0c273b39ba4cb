// The `groups:` config parser: each group's guards, reasons, result screens, write mode and
// agent settings, checked at load (PolicyGroup's constructor and parsePolicyGroups).
#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>

#include "analysis/plan.h"
#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/fixed_settings.h"
#include "guards/guard.h"
#include "guards/guard_util.h"
#include "guards/masking.h"
#include "guards/policy.h"
#include "guards/untrusted.h"

namespace pgwarden::guards {

namespace {

// screen_probe_timeout's ceiling: the statement's reply waits for the probe.
constexpr std::chrono::milliseconds kMaxScreenProbe{1000};

bool validCode(const std::string& code) {
  if (code.empty() || !std::isupper(static_cast<unsigned char>(code[0]))) return false;
  for (char c : code) {
    if (!std::isupper(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

ReasonOverrides parseReasons(const YAML::Node& node, const std::string& path,
                             const std::vector<std::unique_ptr<Guard>>& guards) {
  ReasonOverrides out;
  if (!node.IsDefined() || node.IsNull()) return out;
  config::requireMap(node, path);
  // The result screens speak for every group.
  std::vector<std::string_view> known(std::begin(codes::kResultScreens), std::end(codes::kResultScreens));
  bool any_code = false;
  for (const auto& g : guards) {
    for (auto c : g->codes()) {
      any_code = any_code || c == "*";
      known.push_back(c);
    }
  }
  for (const auto& kv : node) {
    const std::string code = kv.first.as<std::string>();
    const std::string key = path + "." + code;
    if (!validCode(code)) config::fail(kv.first, key, "reason codes are upper case, like MISSING_PREDICATE");
    if (!any_code && std::find(known.begin(), known.end(), code) == known.end()) {
      std::string list;
      for (auto c : known) list += (list.empty() ? "" : ", ") + std::string(c);
      config::fail(kv.first, key, "no guard of this group answers with " + code + " (codes here: " + list + ")");
    }
    if (kv.second.IsScalar()) {
      out[code]["*"] = kv.second.as<std::string>();
    } else if (kv.second.IsMap()) {
      for (const auto& t : kv.second) {
        const std::string table = t.first.as<std::string>();
        if (!t.second.IsScalar()) config::fail(t.second, key + "." + table, "expected a message string");
        out[code][table] = t.second.as<std::string>();
      }
    } else {
      config::fail(kv.second, key, "expected a message, or a map of table -> message");
    }
  }
  return out;
}

// result_screens: {CODE: off|warn|deny, ...}; codes not listed warn.
std::map<std::string, Action, std::less<>> parseResultScreens(const YAML::Node& node, const std::string& path) {
  std::map<std::string, Action, std::less<>> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  config::requireMap(node, path);
  for (const auto& kv : node) {
    const std::string code = kv.first.as<std::string>();
    const std::string key = path + "." + code;
    if (std::find(std::begin(codes::kResultScreens), std::end(codes::kResultScreens), code) ==
        std::end(codes::kResultScreens)) {
      std::string list;
      for (auto c : codes::kResultScreens) list += (list.empty() ? "" : ", ") + std::string(c);
      config::fail(kv.first, key, "unknown result screen " + code + " (known: " + list + ")");
    }
    const std::string action = kv.second.IsScalar() ? kv.second.as<std::string>() : std::string();
    if (action == "off") {
      out[code] = Action::kAllow;
    } else if (action == "warn") {
      out[code] = Action::kWarn;
    } else if (action == "deny") {
      out[code] = Action::kDeny;
    } else {
      config::fail(kv.second, key, "expected off, warn or deny, got '" + action + "'");
    }
  }
  return out;
}

// The write mode's keys. A read_only group with write keys, or a write group that also lists a
// read_only guard (which would refuse every write), is a mistake worth stopping start-up for.
WriteMode parseWriteMode(const YAML::Node& node, const std::string& path, const GroupSettings& settings,
                         const std::vector<std::unique_ptr<Guard>>& chain) {
  WriteMode w;
  const std::string mode = config::getString(node, path, "mode", "read_only");
  if (mode != "read_only" && mode != "guarded_writes") {
    config::fail(node["mode"], path + ".mode", "expected read_only or guarded_writes, got '" + mode + "'");
  }
  w.guarded = mode == "guarded_writes";
  for (const char* key : {"max_rows_affected", "transaction_idle_timeout", "transaction_max_age", "allow_ddl"}) {
    if (!w.guarded && node[key].IsDefined()) {
      config::fail(node[key], path + "." + key, "only a group with mode: guarded_writes takes this key");
    }
  }
  if (!w.guarded) return w;
  const YAML::Node caps = node["max_rows_affected"];
  if (caps.IsDefined() && !caps.IsNull()) {
    const std::string cpath = path + ".max_rows_affected";
    config::requireMap(caps, cpath);
    config::checkKeys(caps, cpath, {"statement", "transaction"});
    w.max_rows_statement = config::getInt(caps, cpath, "statement", w.max_rows_statement, 1, 1000000000);
    w.max_rows_transaction = config::getInt(caps, cpath, "transaction", w.max_rows_transaction, 1, 1000000000);
  }
  w.idle_timeout = config::getDuration(node, path, "transaction_idle_timeout", w.idle_timeout);
  w.max_age = config::getDuration(node, path, "transaction_max_age", w.max_age);
  if (w.idle_timeout.count() <= 0 || w.max_age.count() <= 0) {
    config::fail(node, path, "transaction_idle_timeout and transaction_max_age must be above 0");
  }
  w.allow_ddl = config::getBool(node, path, "allow_ddl", false);
  for (size_t i = 0; i < chain.size(); ++i) {
    if (chain[i]->kind() == "read_only") {
      config::fail(node["guards"][i], path + ".guards[" + std::to_string(i) + "]",
                   "a guarded_writes group cannot list the read_only guard (it refuses every write); "
                   "the write mode applies read_only's other checks itself");
    }
  }
  // The same guards a read-only group would list, built with their defaults; the write mode
  // runs them on what is not a write (read_checks) and on everything (function_checks).
  YAML::Node ro;
  ro["kind"] = "read_only";
  ro["protected_settings"].push_back("session_replication_role");
  w.read_checks = makeReadOnlyGuard(ro, path + ".mode", settings);
  YAML::Node fn;
  fn["kind"] = "functions";
  w.function_checks = makeFunctionsGuard(fn, path + ".mode", settings);
  return w;
}

}  // namespace

PolicyMap parsePolicyGroups(const YAML::Node& groups) {
  return parsePolicyGroups(groups, GuardRegistry::builtin());
}

PolicyMap parsePolicyGroups(const YAML::Node& groups, const GuardRegistry& registry) {
  PolicyMap out;
  config::requireMap(groups, "groups");
  for (const auto& kv : groups) {
    const std::string name = kv.first.as<std::string>();
    const std::string path = "groups." + name;
    const YAML::Node node = kv.second;
    config::checkKeys(node, path, {"search_path", "reasons", "guards", "result_screens", "mode",
                                   "max_rows_affected", "transaction_idle_timeout",
                                   "transaction_max_age", "allow_ddl", "pool_mode",
                                   "masked_columns", "masked_as", "schema_only",
                                   "untrusted_content", "soft_delete_columns", "result_assertions",
                                   "read_replicas", "screen_probe_timeout"});
    std::vector<std::string> search_path = config::getStringList(node, path, "search_path");
    const GroupSettings settings{name, search_path, protectedFor(search_path), {}};

    std::vector<std::unique_ptr<Guard>> chain;
    const YAML::Node list = node["guards"];
    if (list.IsDefined() && !list.IsNull()) {
      config::requireSequence(list, path + ".guards");
      for (size_t i = 0; i < list.size(); ++i) {
        const YAML::Node g = list[i];
        const std::string gpath = path + ".guards[" + std::to_string(i) + "]";
        config::requireMap(g, gpath);
        const auto kind = config::getOptionalString(g, gpath, "kind");
        if (!kind) config::fail(g, gpath + ".kind", "every guard needs a kind");
        const GuardFactory* factory = registry.find(*kind);
        if (!factory) {
          std::string known;
          for (const auto& k : registry.kinds()) known += (known.empty() ? "" : ", ") + k;
          config::fail(g["kind"], gpath + ".kind", "unknown guard kind '" + *kind + "' (known: " + known + ")");
        }
        const std::string action = config::getString(g, gpath, "action", "deny");
        if (action != "deny" && action != "warn") {
          config::fail(g["action"], gpath + ".action", "expected deny or warn, got '" + action + "'");
        }
        std::unique_ptr<Guard> guard = (*factory)(g, gpath, settings);
        guard->setWarnOnly(action == "warn");
        chain.push_back(std::move(guard));
      }
    }
    std::shared_ptr<Masking> masking = Masking::parse(node, path);
    if (masking) chain.insert(chain.begin(), makeMaskedColumnsGuard(masking));
    ReasonOverrides reasons = parseReasons(node["reasons"], path + ".reasons", chain);
    auto screens = parseResultScreens(node["result_screens"], path + ".result_screens");
    WriteMode writes = parseWriteMode(node, path, settings, chain);
    auto group = std::make_shared<PolicyGroup>(name, std::move(chain), std::move(search_path),
                                               std::move(reasons), std::move(screens));
    group->setWriteMode(std::move(writes));
    group->setMasking(std::move(masking));
    group->setUntrusted(UntrustedContent::parse(node, path));
    group->setDeclarations(
        parseSoftDeleteColumns(node, path),
        parseResultAssertions(node["result_assertions"], path + ".result_assertions"));
    if (const auto pool_mode = config::getOptionalString(node, path, "pool_mode")) {
      if (*pool_mode != "session" && *pool_mode != "transaction") {
        config::fail(node["pool_mode"], path + ".pool_mode",
                     "expected session or transaction, got '" + *pool_mode + "'");
      }
      group->setPoolMode(*pool_mode);
    }
    group->setReadReplicas(config::getBool(node, path, "read_replicas", false));
    const auto probe = config::getDuration(node, path, "screen_probe_timeout", {});
    if (probe > kMaxScreenProbe) {
      config::fail(node["screen_probe_timeout"], path + ".screen_probe_timeout",
                   "at most 1s: the statement's reply waits for the probe");
    }
    group->setScreenProbe(static_cast<int>(probe.count()));
    out[name] = std::move(group);
  }
  return out;
}

}  // namespace pgwarden::guards
