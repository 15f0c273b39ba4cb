// Text hygiene for history records: UTF-8 validation and repair, truncation at a character
// boundary, and the libpg_query helpers (normalize for redaction, fingerprint) the writer uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace pgwarden::history {

// Length (1-4) of the well-formed UTF-8 sequence at the start of `s`; 0 when there is none.
size_t utf8SequenceLength(std::string_view s);

// True when `s` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
bool isValidUtf8(std::string_view s);

// Replaces every byte that does not start a well-formed sequence with U+FFFD and drops NUL
// bytes (PostgreSQL text cannot hold them). Returns true when anything changed.
bool sanitizeUtf8(std::string& s);

// Cuts `s` to at most `max_bytes`, never inside a multi-byte character (for well-formed input).
// Returns true when it cut. Looks back at most 3 bytes, so the cost does not grow with `s`.
bool truncateUtf8(std::string& s, size_t max_bytes);
// The longest prefix of `s` of at most `max_bytes` that ends on a character boundary (what
// truncateUtf8 leaves).
std::string_view utf8Prefix(std::string_view s, size_t max_bytes);

// pg_query_normalize: constants become $1, $2... (the text kept when history.redact_literals is
// on). Fails when the text does not parse.
Result<std::string> normalizeSql(const std::string& sql);

// libpg_query's fingerprint as 16 lower-case hex digits: one value per statement shape, whatever
// the literals, whitespace, case or comments. Fails when the text does not parse.
Result<std::string> fingerprintSql(const std::string& sql);

// The text stored instead of a statement that cannot be normalized while redact_literals is on:
// its literals cannot be told apart from the rest, so none of it is kept.
inline constexpr std::string_view kRedactedUnparsable = "/* redacted: statement did not parse */";

// "2024-05-01T12:00:00.123456Z": fixed width, so the text sorts like the instant (SQLite stores
// it as TEXT; PostgreSQL reads it as timestamptz).
std::string formatTimestampUs(int64_t epoch_us);
// The same text written to `out` (kTimestampChars bytes, no NUL) without allocating: the writer
// thread formats two per record.
inline constexpr size_t kTimestampChars = 27;
void formatTimestampUs(int64_t epoch_us, char* out);

}  // namespace pgwarden::history
