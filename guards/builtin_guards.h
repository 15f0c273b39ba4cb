// Factories of the built-in guard kinds, one source file each. GuardRegistry::builtin() maps the
// config `kind:` names to these. Internal to guards/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "guards/guard.h"

namespace pgwarden::guards {

class Masking;
// The implicit first guard of a group with masked_columns (guard_masked.cpp).
std::unique_ptr<Guard> makeMaskedColumnsGuard(std::shared_ptr<const Masking> masking);
std::unique_ptr<Guard> makeReadOnlyGuard(const YAML::Node& node, const std::string& path,
                                         const GroupSettings& group);
std::unique_ptr<Guard> makeFunctionsGuard(const YAML::Node& node, const std::string& path,
                                          const GroupSettings& group);
std::unique_ptr<Guard> makeTablesGuard(const YAML::Node& node, const std::string& path,
                                       const GroupSettings& group);
std::unique_ptr<Guard> makeMultiStatementGuard(const YAML::Node& node, const std::string& path,
                                               const GroupSettings& group);
std::unique_ptr<Guard> makeRequirePredicateGuard(const YAML::Node& node, const std::string& path,
                                                 const GroupSettings& group);
std::unique_ptr<Guard> makeRowLimitGuard(const YAML::Node& node, const std::string& path,
                                         const GroupSettings& group);
std::unique_ptr<Guard> makeCostGateGuard(const YAML::Node& node, const std::string& path,
                                         const GroupSettings& group);

// The settings no guarded session may change (SET, RESET, set_config): the server-side safety
// settings and the identity. search_path joins them when the group configures one.
const std::vector<std::string>& defaultProtectedSettings();
// True when `name` (lower case) is protected for this group, or is "*" (a set_config whose
// name is not a constant, so it could be any of them).
bool isProtectedSetting(std::string_view name, const std::vector<std::string>& protected_settings);

}  // namespace pgwarden::guards
