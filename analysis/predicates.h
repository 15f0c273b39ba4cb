// What the statement walker reads off expressions and FROM items of libpg_query's parse tree:
// which relations of a query level a predicate reads, whether a WHERE/ON clause can filter rows
// at all, the names a FROM item makes visible, and the aggregate names. Internal to analysis/.
#pragma once

#include "common/ascii.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/pg_json.h"

namespace pgwarden::analysis::detail {

using pgjson::array;
using pgjson::asNode;
using pgjson::element;
using pgjson::Node;
using pgjson::object;

// ---- Name helpers ----

using pgwarden::iequals;
using pgwarden::lower;
bool isContainer(element e);

// ---- Column references and trivial predicates ----

using Names = std::vector<std::string_view>;

// Which relations of a query level an expression reads columns of.
struct Refs {
  bool any = false;       // reads some column of the level
  bool wildcard = false;  // an unqualified column: may belong to any relation of the level
  std::vector<std::string_view> quals;
  bool references(std::string_view name) const {
    return wildcard || std::find(quals.begin(), quals.end(), name) != quals.end();
  }
};

std::vector<Refs> filtersOf(element expr, const Names& level);
bool matches(const std::vector<Refs>& filters, std::string_view name);
std::string_view aliasOf(object body);
void fromNames(element item, Names& out);
bool armUnbounded(object sel, std::string_view cte);

// ---- Aggregates ----

bool collectingName(std::string_view n);
bool aggregateName(std::string_view n);

}  // namespace pgwarden::analysis::detail
