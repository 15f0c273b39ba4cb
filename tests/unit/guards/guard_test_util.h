// Shared pieces of the guards tests: the example config's groups, a catalog snapshot of the sample
// table, groups built from inline YAML, one call that analyses and evaluates a text, and the
// security corpora (tests/security/*.tsv).
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

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
inline std::shared_ptr<const analysis::TableStatsSnapshot> sampleStats() {
  return analysis::TableStatsSnapshot::fromRows({
      {"public", "fct_shipments", "1000000", "ship_date,id", "date,bigint"},
      {"public", "dim_region", "12", "region", "text"},
  });
}

inline PolicyMap groupsFromYaml(const std::string& yaml) { return parsePolicyGroups(YAML::Load(yaml)); }

// A group "g" of the guards in `yaml_guards` (list items, indented four), with `extra` settings.
inline std::shared_ptr<const PolicyGroup> group(const std::string& yaml_guards,
                                                const std::string& extra = "") {
  return groupsFromYaml("g:\n" + extra + "  guards:\n" + yaml_guards).at("g");
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline Decision evaluate(const PolicyGroup& group, const std::string& sql,
                         const analysis::TableStatsSnapshot* stats, bool extended = false,
                         bool inferred_params = false) {
  const auto analysis = analysis::analyzeUncached(sql);
  RequestContext ctx;
  ctx.user = "agent";
  ctx.group = group.name();
  ctx.extended = extended;
  ctx.inferred_params = inferred_params;
  return group.evaluate(*analysis, sql, ctx, stats);
}

// One line of a security corpus: category, expected code (or ALLOW/CAPPED) and the statement.
struct CorpusLine {
  int number = 0;
  std::string category, expect, sql;
};

// Reads tests/security/<file>: three tab-separated columns; \t, \n and \\ escaped in the sql.
inline std::vector<CorpusLine> loadCorpus(const std::string& file) {
  std::ifstream in(sourcePath(file));
  EXPECT_TRUE(in.good()) << file;
  std::vector<CorpusLine> out;
  std::string text;
  int n = 0;
  while (std::getline(in, text)) {
    ++n;
    if (text.empty() || text[0] == '#') continue;
    const size_t a = text.find('\t');
    const size_t b = a == std::string::npos ? a : text.find('\t', a + 1);
    if (b == std::string::npos) {
      ADD_FAILURE() << file << ":" << n << ": expected three tab-separated columns";
      continue;
    }
    std::string sql;
    for (size_t i = b + 1; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) {
        const char e = text[++i];
        sql += e == 't' ? '\t' : e == 'n' ? '\n' : e;
      } else {
        sql += text[i];
      }
    }
    out.push_back(CorpusLine{n, text.substr(0, a), text.substr(a + 1, b - a - 1), std::move(sql)});
  }
  return out;
}

// Every statement of the three security corpora (bypass attempts, ordinary reads, write escapes).
inline std::vector<std::string> allCorpusStatements() {
  std::vector<std::string> out;
  for (const char* file : {"tests/security/bypass_corpus.tsv", "tests/security/allowed_reads.tsv",
                           "tests/security/write_escapes.tsv"}) {
    for (const auto& line : loadCorpus(file)) out.push_back(line.sql);
  }
  return out;
}

// Codes only a plan can give. Without a server a corpus test checks that such a line is held for
// its plan; live_pg_test.cpp (a real server's plans) and the end-to-end test check the verdict.
inline bool decidedByPlan(const std::string& code) {
  return code == "JOIN_EXPLOSION" || code == "COST_TOO_HIGH" || code == "SEQ_SCAN";
}

}  // namespace pgwarden::guards::test
