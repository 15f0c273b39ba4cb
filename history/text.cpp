// UTF-8 repair and truncation, and the libpg_query calls the writer thread makes. Everything here
// runs on the writer thread (or in tests), never on the event loop, except truncateUtf8.
#include "history/text.h"

#include <pg_query.h>

#include <cstring>

namespace pgwarden::history {

namespace {

// Length of the well-formed sequence starting at p (n bytes available), 0 when it is not one.
size_t sequenceLength(const unsigned char* p, size_t n) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  auto cont = [&](size_t i) { return i < n && (p[i] & 0xC0) == 0x80; };
  if (c < 0xE0) return cont(1) ? 2 : 0;
  if (c < 0xF0) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0;  // overlong
    if (c == 0xED && p[1] > 0x9F) return 0;  // UTF-16 surrogates
    return 3;
  }
  if (c < 0xF5) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && p[1] < 0x90) return 0;  // overlong
    if (c == 0xF4 && p[1] > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

size_t utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  return sequenceLength(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

bool isValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = sequenceLength(p + i, s.size() - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

bool sanitizeUtf8(std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  // Fast path: most text is clean and is left untouched without a copy. Eight bytes at a time
  // while they are ASCII without a NUL (most statements are), then byte by byte.
  size_t i = 0;
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHighBits = 0x8080808080808080ull;
  while (i + 8 <= s.size()) {
    uint64_t v = 0;
    std::memcpy(&v, p + i, 8);
    if (((v | ((v - kOnes) & ~v)) & kHighBits) != 0) break;
    i += 8;
  }
  while (i < s.size()) {
    const size_t len = sequenceLength(p + i, s.size() - i);
    if (len == 0 || p[i] == 0) break;
    i += len;
  }
  if (i == s.size()) return false;
  std::string out;
  out.reserve(s.size() + 8);
  out.append(s, 0, i);
  while (i < s.size()) {
    const size_t len = sequenceLength(p + i, s.size() - i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      if (p[i] != 0) out.append(s, i, len);
      i += len;
    }
  }
  s.swap(out);
  return true;
}

std::string_view utf8Prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t cut = max_bytes;
  // s[cut] is the first byte dropped; while it is a continuation byte, the character it belongs
  // to started before the cut, so move the cut back to that character's lead byte.
  for (int back = 0; back < 3 && cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80;
       ++back) {
    --cut;
  }
  return s.substr(0, cut);
}

bool truncateUtf8(std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return false;
  s.resize(utf8Prefix(s, max_bytes).size());
  return true;
}

Result<std::string> normalizeSql(const std::string& sql) {
  PgQueryNormalizeResult r = pg_query_normalize(sql.c_str());
  if (r.error != nullptr) {
    std::string message = r.error->message != nullptr ? r.error->message : "parse error";
    pg_query_free_normalize_result(r);
    return Result<std::string>::fail(message);
  }
  std::string out = r.normalized_query != nullptr ? r.normalized_query : "";
  pg_query_free_normalize_result(r);
  return out;
}

Result<std::string> fingerprintSql(const std::string& sql) {
  PgQueryFingerprintResult r = pg_query_fingerprint(sql.c_str());
  if (r.error != nullptr) {
    std::string message = r.error->message != nullptr ? r.error->message : "parse error";
    pg_query_free_fingerprint_result(r);
    return Result<std::string>::fail(message);
  }
  std::string out = r.fingerprint_str != nullptr ? r.fingerprint_str : "";
  pg_query_free_fingerprint_result(r);
  return out;
}

void formatTimestampUs(int64_t epoch_us, char* out) {
  // Clamp to years 0001..9999 so the text stays fixed-width and PostgreSQL accepts it.
  constexpr int64_t kMinUs = -62135596800LL * 1000000;
  constexpr int64_t kMaxUs = 253402300799LL * 1000000 + 999999;
  if (epoch_us < kMinUs) epoch_us = kMinUs;
  if (epoch_us > kMaxUs) epoch_us = kMaxUs;
  int64_t secs = epoch_us / 1000000;
  int64_t frac = epoch_us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    secs -= 1;
  }
  int64_t days = secs / 86400;
  int64_t sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    days -= 1;
  }
  // Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's civil_from_days): gmtime_r
  // and snprintf cost more than the rest of the record's formatting together.
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t day = doy - (153 * mp + 2) / 5 + 1;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  const int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  auto digits = [&out](size_t at, int64_t v, int width) {
    for (int i = width - 1; i >= 0; --i) {
      out[at + static_cast<size_t>(i)] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
  };
  digits(0, year, 4);
  out[4] = '-';
  digits(5, month, 2);
  out[7] = '-';
  digits(8, day, 2);
  out[10] = 'T';
  digits(11, sod / 3600, 2);
  out[13] = ':';
  digits(14, sod / 60 % 60, 2);
  out[16] = ':';
  digits(17, sod % 60, 2);
  out[19] = '.';
  digits(20, frac, 6);
  out[26] = 'Z';
}

std::string formatTimestampUs(int64_t epoch_us) {
  std::string out(kTimestampChars, '\0');
  formatTimestampUs(epoch_us, out.data());
  return out;
}

}  // namespace pgwarden::history
