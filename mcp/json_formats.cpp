// The string formats of the tool-schema subset, scanned by hand (see json_formats.h): each check
// walks the string once, so its cost is linear and it cannot fail in any way but "no".
#include "mcp/json_formats.h"

#include <cstddef>

namespace pgwarden::mcp {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// `n` digits at s[pos..], as a number; nullopt when any is not a digit or the string is short.
std::optional<int> digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return std::nullopt;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!isDigit(s[i])) return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

bool isLeapYear(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int daysInMonth(int y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && isLeapYear(y) ? 29 : kDays[m - 1];
}

// One row per format, so a new one is a line here and its scanner.
struct FormatInfo {
  StringFormat format;
  std::string_view name;
  std::string_view description;
  bool (*matches)(std::string_view);
};

const FormatInfo kFormats[] = {
    {StringFormat::kDate, "date", "a date (YYYY-MM-DD)", isDate},
    {StringFormat::kDateTime, "date-time", "a date-time (RFC 3339, e.g. 2024-07-01T13:45:00Z)",
     isDateTime},
    {StringFormat::kTime, "time", "a time (RFC 3339, e.g. 13:45:00Z or 13:45:00+02:00)", isTime},
    {StringFormat::kUuid, "uuid", "a UUID (8-4-4-4-12 hexadecimal digits)", isUuid},
    {StringFormat::kEmail, "email", "an email address (name@example.com)", isEmail},
};

const FormatInfo& info(StringFormat f) {
  for (const auto& i : kFormats)
    if (i.format == f) return i;
  return kFormats[0];  // unreachable: every enumerator has a row
}

}  // namespace

std::optional<StringFormat> parseStringFormat(std::string_view name) {
  for (const auto& i : kFormats)
    if (i.name == name) return i.format;
  return std::nullopt;
}

std::string_view formatName(StringFormat f) { return info(f).name; }
std::string_view formatDescription(StringFormat f) { return info(f).description; }
bool matchesFormat(StringFormat f, std::string_view s) { return info(f).matches(s); }

bool isDate(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  auto y = digits(s, 0, 4), m = digits(s, 5, 2), d = digits(s, 8, 2);
  if (!y || !m || !d || *m < 1 || *m > 12) return false;
  return *d >= 1 && *d <= daysInMonth(*y, *m);
}

bool isTime(std::string_view s) {
  if (s.size() < 9 || s[2] != ':' || s[5] != ':') return false;
  auto h = digits(s, 0, 2), m = digits(s, 3, 2), sec = digits(s, 6, 2);
  if (!h || !m || !sec || *h > 23 || *m > 59 || *sec > 60) return false;
  size_t pos = 8;
  if (s[pos] == '.') {
    size_t start = ++pos;
    while (pos < s.size() && isDigit(s[pos])) ++pos;
    if (pos == start) return false;
  }
  if (pos >= s.size()) return false;  // RFC 3339 requires the offset
  int offsetMinutes = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    if (pos + 1 != s.size()) return false;
  } else if (s[pos] == '+' || s[pos] == '-') {
    if (s.size() - pos != 6 || s[pos + 3] != ':') return false;
    auto oh = digits(s, pos + 1, 2), om = digits(s, pos + 4, 2);
    if (!oh || !om || *oh > 23 || *om > 59) return false;
    offsetMinutes = (s[pos] == '+' ? 1 : -1) * (*oh * 60 + *om);
  } else {
    return false;
  }
  if (*sec == 60) {
    // A leap second is inserted at the end of a UTC day: 23:59:60 once the offset is removed.
    int utc = ((*h * 60 + *m - offsetMinutes) % 1440 + 1440) % 1440;
    if (utc != 23 * 60 + 59) return false;
  }
  return true;
}

bool isDateTime(std::string_view s) {
  if (s.size() < 11 || (s[10] != 'T' && s[10] != 't')) return false;
  return isDate(s.substr(0, 10)) && isTime(s.substr(11));
}

bool isUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !isHex(s[i])) return false;
  }
  return true;
}

bool isEmail(std::string_view s) {
  size_t at = s.find('@');
  if (at == std::string_view::npos || at == 0 || s.find('@', at + 1) != std::string_view::npos)
    return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  std::string_view domain = s.substr(at + 1);
  size_t dot = domain.find('.');
  // The dot must separate two non-empty labels: "a@.com" and "a@com." are not addresses.
  return dot != std::string_view::npos && dot != 0 && domain.back() != '.';
}

}  // namespace pgwarden::mcp
