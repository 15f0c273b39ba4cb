// The settings no policy group may change, whatever guards it lists: the two that decide how the
// server splits and reads a text (standard_conforming_strings and client_encoding), which pgwarden
// must read exactly as the server does, and pg_settings, whose writes are set_config() calls
// under another name. Every door judges them before the chain (PolicyGroup::evaluate); the
// startup filter and the server connection's ParameterStatus watch hold the same values.
#pragma once

#include <optional>
#include <string_view>

#include "analysis/analysis.h"
#include "guards/guard.h"

namespace pgwarden::guards {

// The only client_encoding pgwarden accepts, as the server reports it.
inline constexpr std::string_view kClientEncoding = "UTF8";
// standard_conforming_strings as pgwarden's lexer reads texts, as the server reports it.
inline constexpr std::string_view kStandardConformingStrings = "on";

// True for a spelling of UTF8 the server accepts as client_encoding ("UTF8", "utf-8", "unicode").
bool isUtf8EncodingName(std::string_view value);

// True when `value`, as the server reads a boolean setting, is on ("on", "true", "yes", "1").
bool isOnValue(std::string_view value);

// standard_conforming_strings or client_encoding (any case).
bool isLexicalSetting(std::string_view name);

// False when a server's report of `name` (ParameterStatus) says texts are no longer read the way
// pgwarden reads them: standard_conforming_strings other than "on", client_encoding other than
// "UTF8". True for every other setting.
bool serverReportAccepted(std::string_view name, std::string_view value);

// A PROTECTED_SETTING denial when `st` would change a lexical setting to a value pgwarden cannot
// read under (SET, SET LOCAL, SET ... TO DEFAULT, RESET, set_config(), set_config() with a name
// that is not a constant), or writes pg_catalog.pg_settings.
std::optional<GuardResult> fixedSettingChange(const analysis::StatementInfo& st);

}  // namespace pgwarden::guards
