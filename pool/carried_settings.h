// The settings a pooled connection carries from one client to the next (guards/pooled_state_check.h
// names them), and the statement that brings a connection's values to what its next user wants.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "common/param_list.h"

namespace pgwarden::pool {

class ServerConnection;

// PostgreSQL 15 reports all carried settings with ParameterStatus except extra_float_digits and
// search_path: for those pgwarden notes on the connection what it set.
bool isReportedSetting(std::string_view name);

// SET/RESET statements (possibly none) that bring `c`'s carried settings to `wanted` (name, value
// pairs in ParameterStatus spelling); a setting `wanted` does not name goes back to what the
// connection had after its login, so one client's DateStyle never reaches another. Notes the
// unreported values it sets on `c`.
std::string carriedSyncSql(ServerConnection& c, const ParamList& wanted);

// What a RESET (or SET ... TO DEFAULT) of a carried setting goes back to for this client, as on
// a direct connection: the value it started with, '' for an application_name it did not send;
// nullopt where the connection's login value is already right (a setting the client did not
// send, client_encoding and search_path, which other rules own).
std::optional<std::string> startupValue(std::string_view name, const ParamList& startup);

// `sql` with each RESET / SET ... TO DEFAULT of a carried setting turned into a SET to the
// client's startup value (a pooled connection's own reset values are pgwarden's login values);
// nullopt when there is none. RESET ALL is left as it is.
std::optional<std::string> resetsToStartup(std::string_view sql,
                                           const std::vector<analysis::StatementInfo>& statements,
                                           const ParamList& startup);

// A DateStyle as PostgreSQL resolves it at login: a part the client left out (the output style,
// or the field order) comes from the server's own value `login` ("ISO, MDY"), as a backend's
// startup does, never from whatever the pooled connection's last client set (German without an
// order means DMY, as in PostgreSQL). Any value it cannot read is returned unchanged.
std::string completeDateStyle(std::string_view wanted, std::string_view login);

// `params`' DateStyle completed against `login` (completeDateStyle), where it has one.
void completeDateStyle(ParamList& params, std::string_view login);

// `v` as a SQL string literal (E'' when it holds a backslash).
std::string quoteSqlLiteral(std::string_view v);

}  // namespace pgwarden::pool
