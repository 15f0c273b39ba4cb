// The `search` tool: tables, views and columns whose names or comments hold a text, ranked (an
// exact name first, then a name that starts with it, one that holds it, then a comment that
// does), at three levels of detail sized for a model's context. One catalog statement; the
// caller filters the matches by its policy.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcp/jsonrpc.h"

namespace pgwarden::mcp {

inline constexpr int64_t kSearchDefaultLimit = 20;
inline constexpr int64_t kSearchMaxLimit = 100;
// Matches read from the catalog at most (before the policy's filter and the caller's limit).
inline constexpr int64_t kSearchMaxRows = 500;

// `s` as a SQL string literal ('' doubled; standard_conforming_strings, as pgwarden's servers
// have).
std::string quoteLiteral(std::string_view s);

enum class SearchDetail : uint8_t { kNames, kSummary, kFull };
std::optional<SearchDetail> parseSearchDetail(std::string_view s);

// The catalog statement for `text` (matched case-insensitively), limited to schema `schema` when
// set; each row: what ("table" or "column"), schema, table, column, type, comment, relkind, score.
std::string searchSql(std::string_view text, std::string_view schema);

// The tool's answer from those rows: at most `limit` matches the policy lets the caller see
// (`allowed` takes "schema.table"), best first; `truncated` when more matched.
Json searchAnswer(const std::vector<std::vector<std::optional<std::string>>>& rows,
                  SearchDetail detail, int64_t limit,
                  const std::function<bool(const std::string&)>& allowed);

}  // namespace pgwarden::mcp
