// guards: the catalog snapshot (rows as the daemon reads them) and the catalog query itself,
// which must be a read every guarded group lets through.
#include "guards/guard_util.h"
#include "tests/unit/guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

TEST(TableStats, FromRowsSkipsBadRowsAndKeepsColumnTypesAligned) {
  const auto s = analysis::TableStatsSnapshot::fromRows({
      {"public", "a", "1500", "x,y,x", "date,bigint,date"},
      {"public", "b", "-1", "x"},
      {"public", "c", "12abc", "x"},
      {"public", "d"},
      {"", "e", "5", ""},
      {"s", "f", "0", ""},
      {"s", "g", "77", "k"},
  });
  EXPECT_EQ(s->size(), 3u);
  const analysis::TableStats* a = s->find("public", "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->estimated_rows, 1500);
  EXPECT_EQ(a->indexed_columns, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(a->indexed_column_types, (std::vector<std::string>{"date", "bigint"}));
  EXPECT_EQ(s->find("public", "b"), nullptr);
  EXPECT_EQ(s->find("public", "c"), nullptr);
  ASSERT_NE(s->find("s", "f"), nullptr);
  EXPECT_TRUE(s->find("s", "f")->indexed_columns.empty());
  ASSERT_NE(s->find("s", "g"), nullptr);
  EXPECT_EQ(s->find("s", "g")->indexed_column_types, std::vector<std::string>{""});
  EXPECT_EQ(s->find("S", "g"), nullptr);
}

// A lookup by (schema, table) orders exactly as the joined "schema.table" key would, so the
// snapshot's map finds every table without building the key.
TEST(TableStats, QualifiedNamesCompareAsTheirJoinedKey) {
  const std::vector<std::string> parts = {"", "a", "b", "ab", "a.b", "public", "publi", "publicx",
                                          "pg_catalog", "\xc3\xa9t\xc3\xa9", "-", "/", "Z"};
  std::vector<std::string> keys;
  for (const auto& x : parts) {
    keys.push_back(x);
    for (const auto& y : parts) keys.push_back(x + "." + y);
  }
  const auto sign = [](int v) { return (v > 0) - (v < 0); };
  for (const auto& schema : parts) {
    for (const auto& table : parts) {
      const std::string joined = schema + "." + table;
      for (const auto& key : keys) {
        EXPECT_EQ(sign(analysis::compareQualified(key, analysis::QualifiedName{schema, table})),
                  sign(key.compare(joined)))
            << "key '" << key << "' against '" << joined << "'";
      }
    }
  }
  const auto snap = analysis::TableStatsSnapshot::fromRows({{"public", "t", "10", "id"},
                                                            {"public", "t2", "20", ""},
                                                            {"s.x", "y", "30", ""},
                                                            {"pg_catalog", "pg_class", "400", ""}});
  ASSERT_NE(snap->find("public", "t"), nullptr);
  EXPECT_EQ(snap->find("public", "t")->estimated_rows, 10);
  EXPECT_EQ(snap->find("public", "t2")->estimated_rows, 20);
  EXPECT_EQ(snap->find("s.x", "y")->estimated_rows, 30);
  EXPECT_EQ(snap->find("pg_catalog", "pg_class")->estimated_rows, 400);
  EXPECT_EQ(snap->find("public", "t3"), nullptr);
  EXPECT_EQ(snap->find("publi", "t"), nullptr);
  EXPECT_EQ(snap->find("", "public.t"), nullptr);
}

// findStats walks candidates() without building its strings: the same table and the same
// resolved name for every relation and search path, found or not, with a snapshot or without.
TEST(TableStats, FindStatsAgreesWithTheCandidateNames) {
  const auto snap = analysis::TableStatsSnapshot::fromRows({{"public", "t", "10", ""},
                                                            {"app", "t", "11", ""},
                                                            {"app", "u", "12", ""},
                                                            {"pg_catalog", "pg_class", "13", ""},
                                                            {"pg_catalog", "t", "14", ""}});
  const std::vector<std::vector<std::string>> paths = {
      {}, {"app"}, {"$user", "app", "public"}, {"$user"}, {"pg_catalog", "app"}, {"PG_CATALOG"}, {"nope", "public"}};
  for (const auto& path : paths) {
    GroupSettings group;
    group.search_path = path;
    for (const std::string schema : {"", "public", "app", "pg_catalog", "zz"}) {
      for (const std::string name : {"t", "u", "pg_class", "pg_x", "missing"}) {
        analysis::RelationRef rel;
        rel.schema = schema;
        rel.name = name;
        for (const analysis::TableStatsSnapshot* stats :
             {snap.get(), static_cast<const analysis::TableStatsSnapshot*>(nullptr)}) {
          // The reference: the first candidate the snapshot holds, else the first candidate.
          const std::vector<std::string> names = util::candidates(rel, group);
          const analysis::TableStats* want = nullptr;
          std::string want_name = names.empty() ? name : names.front();
          for (const auto& n : names) {
            const size_t dot = n.find('.');
            want = stats ? stats->find(n.substr(0, dot), n.substr(dot + 1)) : nullptr;
            if (want) {
              want_name = n;
              break;
            }
          }
          std::string got_name = "stale";
          EXPECT_EQ(util::findStats(stats, rel, group, &got_name), want) << schema << "." << name;
          EXPECT_EQ(got_name, want_name) << schema << "." << name;
          EXPECT_EQ(util::findStats(stats, rel, group, nullptr), want);
        }
      }
    }
  }
}

// The names an unqualified relation could resolve to, in the server's search order.
TEST(TableStats, CandidatesFollowTheSearchPath) {
  const auto names = [](std::vector<std::string> path, std::string schema, std::string name) {
    GroupSettings group;
    group.search_path = std::move(path);
    analysis::RelationRef rel;
    rel.schema = std::move(schema);
    rel.name = std::move(name);
    return util::candidates(rel, group);
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names({}, "", "t"), (Names{"public.t"}));
  EXPECT_EQ(names({}, "", "pg_x"), (Names{"pg_catalog.pg_x", "public.pg_x"}));
  EXPECT_EQ(names({"$user", "app", "public"}, "", "t"), (Names{"app.t", "public.t"}));
  EXPECT_EQ(names({"PG_CATALOG", "app"}, "", "pg_x"), (Names{"PG_CATALOG.pg_x", "app.pg_x"}));
  EXPECT_EQ(names({"$user"}, "", "t"), Names{});
  EXPECT_EQ(names({"app"}, "other", "pg_x"), (Names{"other.pg_x"}));
}

// A pattern matched against "schema.name" read in place agrees with the joined name.
TEST(TableStats, QualifiedGlobMatchAgreesWithTheJoinedName) {
  const std::vector<std::string> patterns = {"public.*", "*.t", "pg_catalog.pg_authid", "p*c.t?", "*",
                                             "*.*", "app.", ".t", "public.t*", "PUBLIC.T", "*b*.*"};
  const std::vector<std::pair<std::string, std::string>> names = {
      {"public", "t"}, {"public", "tt"}, {"pg_catalog", "pg_authid"}, {"app", ""}, {"", "t"}, {"Public", "T"}};
  for (const auto& p : patterns) {
    for (const auto& [schema, name] : names) {
      for (const bool icase : {true, false}) {
        EXPECT_EQ(util::globMatch(p, schema, name, icase), util::globMatch(p, schema + "." + name, icase))
            << p << " " << schema << "." << name << " icase " << icase;
      }
    }
  }
}

TEST(TableStats, CatalogQueryIsAReadEveryGroupAllows) {
  const auto a = analysis::analyzeUncached(analysis::TableStatsSnapshot::catalogQuery());
  ASSERT_TRUE(a->ok) << a->error;
  ASSERT_EQ(a->statements.size(), 1u);
  const auto& st = a->statements[0];
  EXPECT_EQ(st.kind, analysis::StatementKind::kSelect);
  EXPECT_EQ(st.intent, analysis::Intent::kCatalog);
  for (const auto& r : st.relations) EXPECT_EQ(r.schema, "pg_catalog") << r.name;
  for (const auto& [name, group] : test::exampleGroups()) {
    RequestContext ctx;
    const Decision d =
        group->evaluate(*a, analysis::TableStatsSnapshot::catalogQuery(), ctx, nullptr);
    EXPECT_FALSE(d.denied) << name << ": " << d.deny.message;
  }
}

}  // namespace
}  // namespace pgwarden::guards
