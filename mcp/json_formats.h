// The string formats a tool schema may assert (date, date-time, time, uuid, email), checked by
// hand-written scanners: no std::regex, so a hostile argument costs time linear in its length.
// Split from json_schema.cpp so each check can be read and tested on its own.
#pragma once

#include <optional>
#include <string_view>

namespace pgwarden::mcp {

enum class StringFormat { kDate, kDateTime, kTime, kUuid, kEmail };

// "date" -> kDate, ...; nullopt for a format outside the subset.
std::optional<StringFormat> parseStringFormat(std::string_view name);
// The format's name as written in a schema, and how it reads in a message ("a date (YYYY-MM-DD)").
std::string_view formatName(StringFormat f);
std::string_view formatDescription(StringFormat f);

bool matchesFormat(StringFormat f, std::string_view s);

// RFC 3339 full-date: YYYY-MM-DD, a real day of the Gregorian calendar (leap years included).
bool isDate(std::string_view s);
// RFC 3339 full-time: HH:MM:SS[.fraction](Z|z|+HH:MM|-HH:MM); second 60 only at 23:59 UTC.
bool isTime(std::string_view s);
// RFC 3339 date-time: a date, T or t, a time.
bool isDateTime(std::string_view s);
// 8-4-4-4-12 hexadecimal digits, either case.
bool isUuid(std::string_view s);
// Deliberately simple: one @, non-empty local and domain parts, a dot inside the domain, no
// whitespace or control characters.
bool isEmail(std::string_view s);

}  // namespace pgwarden::mcp
