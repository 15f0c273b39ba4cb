// The settings a pooled connection carries from one client to the next (guards/session_state.h
// names them), and the statement that brings a connection's values to what its next user wants.
#pragma once

#include <string>
#include <string_view>

#include "common/param_list.h"

namespace pgwarden::daemon {

class ServerConnection;

// PostgreSQL 15 reports all carried settings with ParameterStatus except extra_float_digits and
// search_path: for those pgwarden notes on the connection what it set.
bool isReportedSetting(std::string_view name);

// SET/RESET statements (possibly none) that bring `c`'s carried settings to `wanted` (name, value
// pairs in ParameterStatus spelling); a setting `wanted` does not name goes back to what the
// connection had after its login, so one client's DateStyle never reaches another. Notes the
// unreported values it sets on `c`.
std::string carriedSyncSql(ServerConnection& c, const ParamList& wanted);

// `v` as a SQL string literal (E'' when it holds a backslash).
std::string quoteSqlLiteral(std::string_view v);

}  // namespace pgwarden::daemon
