// What a statement's outcome looks like to an MCP client: cells as JSON-typed values where that
// loses nothing, result sets, notices, and a denial as the same code, message, detail, hint and
// next step a SQL client reads in its ErrorResponse.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "guards/policy.h"
#include "mcp/jsonrpc.h"
#include "mcp/statement_runner.h"

namespace pgwarden::mcp {

// A text-format cell of type `type_oid` as JSON: booleans, integers within +-2^53, finite floats,
// json/jsonb documents as themselves; every other value (numeric, int8 beyond 2^53, dates, ...)
// as its text, so nothing is rounded.
Json cellJson(uint32_t type_oid, const std::optional<std::string>& cell);
// PostgreSQL's name of a built-in type ("int4", "text", ...), or "oid:<n>".
std::string typeName(uint32_t type_oid);
// {columns: [{name, type}], rows: [[...]], row_count, truncated, max_rows, command}
Json resultSetJson(const ResultSet& set);
// {code, sqlstate, message, detail, hint, next_step} of a denial.
Json denialJson(const guards::Verdict& v);
Json noticesJson(const RunResult& r);
// Whether a failed run was cancelled, and its {code CANCELLED|SERVER_ERROR, sqlstate, message,
// detail, hint, next_step} (next_step null for a cancel).
bool runCancelled(const RunResult& r);
Json runErrorJson(const RunResult& r, std::string_view next_step);
// A run's rows as the query tool answers them: the main result set (the last that returned rows),
// notices, warnings, elapsed_ms, and every set when there were several.
Json queryResultJson(const RunResult& r);
// The text a model reads next to the structured result: pgwarden's own words (codes, counts, its
// denials and next steps) first, then what the database returned fenced as data.
std::string renderText(const Json& structured, std::string_view heading);
// A tools/call result: {content: [the text rendering], structuredContent, isError}.
Json toolResult(Json structured, bool is_error, std::string_view heading);
// The tool result of a call whose arguments break the tool's input schema (`why`): an error the
// model reads and fixes (2025-11-25 and later), {code INVALID_ARGUMENTS, message, next_step}.
Json invalidArgumentsResult(std::string_view tool, std::string_view why);

}  // namespace pgwarden::mcp
