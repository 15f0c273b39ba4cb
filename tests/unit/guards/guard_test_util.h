// Shared pieces of the guards tests: the example config's groups, a catalog snapshot of the sample
// table, groups built from inline YAML, and one call that analyses and evaluates a text.
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>

#include "analysis/analysis.h"
#include "guards/policy.h"

namespace pgwarden::guards::test {

inline std::string sourcePath(const std::string& relative) {
  return std::string(PGW_SOURCE_DIR) + "/" + relative;
}

// The `groups:` section of packaging/pgwarden.yaml, the config format's annotated example.
inline const PolicyMap& exampleGroups() {
  static const PolicyMap groups = parsePolicyGroups(YAML::LoadFile(sourcePath("packaging/pgwarden.yaml"))["groups"]);
  return groups;
}

// What the catalog query returns for the sample database: fct_shipments with about a million rows
// and an index on ship_date, plus a small dimension table.
inline std::shared_ptr<const TableStatsSnapshot> sampleStats() {
  return TableStatsSnapshot::fromRows({
      {"public", "fct_shipments", "1000000", "ship_date,id", "date,bigint"},
      {"public", "dim_region", "12", "region", "text"},
  });
}

inline PolicyMap groupsFromYaml(const std::string& yaml) { return parsePolicyGroups(YAML::Load(yaml)); }

inline Decision evaluate(const PolicyGroup& group, const std::string& sql,
                         const TableStatsSnapshot* stats, bool extended = false) {
  const auto analysis = analyzeUncached(sql);
  RequestContext ctx;
  ctx.user = "agent";
  ctx.group = group.name();
  ctx.extended = extended;
  return group.evaluate(*analysis, sql, ctx, stats);
}

}  // namespace pgwarden::guards::test
