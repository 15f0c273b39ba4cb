// Transaction pooling (docs/operations.md): a client holds a server connection for one transaction
// only, so state a statement leaves on the connection after its transaction ends would reach
// another client, or be missing the next time. The check here names such statements; the
// statement gate refuses them (SESSION_STATE) for sessions that are transaction-pooled.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "analysis/analysis.h"
#include "guards/guard.h"

namespace pgwarden::guards {

// Settings pgwarden carries from one server connection to the next for a transaction-pooled
// client (its startup parameters and its SETs of them), in the spelling ParameterStatus uses;
// "" when `name` (any case) is not one of them.
std::string_view carriedSetting(std::string_view name);
// All of them, in that spelling.
std::span<const std::string_view> carriedSettings();

// A denial (SESSION_STATE) when `st` would leave state on the server connection beyond its
// transaction: a session-level SET of a setting pgwarden does not carry, SQL-level PREPARE,
// EXECUTE and DEALLOCATE, LISTEN/UNLISTEN, DECLARE ... WITH HOLD, temporary tables, LOAD,
// session-level advisory locks and set_config(..., false) of a setting not carried.
std::optional<GuardResult> sessionStateUse(const analysis::StatementInfo& st);

}  // namespace pgwarden::guards
