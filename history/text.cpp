// UTF-8 repair and truncation, and the libpg_query calls the writer thread makes. Everything here
// runs on the writer thread (or in tests), never on the event loop, except truncateUtf8.
#include "history/text.h"

#include <pg_query.h>

#include <cstdio>
#include <ctime>

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
  // Fast path: most text is clean and is left untouched without a copy.
  size_t i = 0;
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

bool truncateUtf8(std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return false;
  size_t cut = max_bytes;
  // s[cut] is the first byte dropped; while it is a continuation byte, the character it belongs
  // to started before the cut, so move the cut back to that character's lead byte.
  for (int back = 0; back < 3 && cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80;
       ++back) {
    --cut;
  }
  s.resize(cut);
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

std::string formatTimestampUs(int64_t epoch_us) {
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
  const time_t t = static_cast<time_t>(secs);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[96];  // roomy enough that the compiler can prove no truncation
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(frac));
  return buf;
}

}  // namespace pgwarden::history
