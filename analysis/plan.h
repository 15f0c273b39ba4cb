// Reads the JSON that EXPLAIN (FORMAT JSON) returns into a PlanSummary: the total cost, every
// node that scans a relation and every join with the scans beneath it. Internal to guards/ (the
// cost gate's input).
#pragma once

#include <string_view>

#include "common/result.h"
#include "guards/guard.h"

namespace pgwarden::guards {

[[nodiscard]] Result<PlanSummary> parsePlanJson(std::string_view json);

}  // namespace pgwarden::guards
