#include "analysis/exposure.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pgwarden::guards {
namespace {

bool reveals(const std::string& sql, const std::string& column) {
  const analysis::ColumnExposure e = analysis::columnExposure(sql);
  EXPECT_TRUE(e.ok) << e.error;
  const auto names = analysis::taintedNames(e, {column});
  for (const auto& m : e.revealed) {
    if (std::find(names.begin(), names.end(), m.name) != names.end()) return true;
  }
  for (const auto& w : e.whole_rows) {
    if (std::find(e.relation_names.begin(), e.relation_names.end(), w) != e.relation_names.end()) {
      return true;
    }
  }
  return e.star_revealed;
}

TEST(ColumnExposure, PlainReferencesCountsAndConditionsShowNothing) {
  for (const char* sql : {
           "SELECT ssn FROM people",
           "SELECT p.ssn, p.name FROM people p",
           "SELECT * FROM people",
           "SELECT p.* FROM people p",
           "SELECT count(*), count(DISTINCT ssn) FROM people",
           "SELECT ssn, count(*) FROM people GROUP BY ssn ORDER BY ssn",
           "SELECT name FROM people WHERE ssn = '1' AND upper(ssn) LIKE 'A%'",
           "SELECT name FROM people WHERE ssn IN (SELECT ssn FROM other)",
           "SELECT x FROM (SELECT ssn AS x FROM people) s",
           "WITH c AS (SELECT ssn FROM people) SELECT ssn FROM c",
           "SELECT a.name FROM people a JOIN other b ON a.ssn = b.ssn",
           "SELECT length(name) FROM people",
       }) {
    EXPECT_FALSE(reveals(sql, "ssn")) << sql;
  }
}

TEST(ColumnExposure, ExpressionsThatCarryTheValueAreFound) {
  for (const char* sql : {
           "SELECT ssn::text FROM people",
           "SELECT ssn || '' FROM people",
           "SELECT substring(ssn, 1, 3) FROM people",
           "SELECT min(ssn) FROM people",
           "SELECT string_agg(ssn, ',') FROM people",
           "SELECT row_to_json(p) FROM people p",
           "SELECT p FROM people p",
           "SELECT to_json(p.*) FROM people p",
           "SELECT ssn FROM people UNION SELECT 'x'",
           "SELECT (SELECT ssn FROM people LIMIT 1)",
           "SELECT x || '' FROM (SELECT ssn AS x FROM people) s",
           "SELECT y || '' FROM (SELECT * FROM people) s(y)",
           "WITH c(z) AS (SELECT ssn FROM people) SELECT upper(z) FROM c",
           "SELECT u FROM people, unnest(ARRAY[people.ssn]) u",
           "SELECT CASE WHEN ssn > '5' THEN 'a' END FROM people",
           "UPDATE people SET name = ssn WHERE id = 1",
           "DELETE FROM people WHERE id = 1 RETURNING ssn",
           "INSERT INTO other SELECT ssn FROM people",
       }) {
    EXPECT_TRUE(reveals(sql, "ssn")) << sql;
  }
}

TEST(ColumnExposure, RefusesWhatItCannotRead) {
  EXPECT_FALSE(analysis::columnExposure("SELEC 1").ok);
  std::string deep = "SELECT ";
  for (int i = 0; i < 500; ++i) deep += "(";
  deep += "1";
  for (int i = 0; i < 500; ++i) deep += ")";
  const analysis::ColumnExposure e = analysis::columnExposure(deep);
  EXPECT_TRUE(!e.ok || e.revealed.empty());
}

}  // namespace
}  // namespace pgwarden::guards
