// The text form of a record's spool id (record_uid).
#include "history/record.h"

#include <charconv>
#include <cstring>

namespace pgwarden::history {

std::string_view formatRecordUid(const Record& r, char* buf, size_t size) {
  if (r.spool_seq == 0 || size < 40) return {};
  // The epoch zero-padded to 16 hex digits, as parseRecordUid expects.
  char hex[16];
  const auto e = std::to_chars(hex, hex + sizeof hex, r.spool_epoch, 16);
  const size_t pad = sizeof hex - static_cast<size_t>(e.ptr - hex);
  std::memset(buf, '0', pad);
  std::memcpy(buf + pad, hex, static_cast<size_t>(e.ptr - hex));
  buf[16] = '-';
  const auto s = std::to_chars(buf + 17, buf + size, r.spool_seq);
  return {buf, static_cast<size_t>(s.ptr - buf)};
}

std::string recordUid(const Record& r) {
  char buf[40];
  return std::string(formatRecordUid(r, buf, sizeof buf));
}

bool parseRecordUid(std::string_view uid, uint64_t* epoch, uint64_t* seq) {
  if (uid.size() < 18 || uid[16] != '-') return false;
  const char* end = uid.data() + uid.size();
  auto e = std::from_chars(uid.data(), uid.data() + 16, *epoch, 16);
  if (e.ec != std::errc() || e.ptr != uid.data() + 16) return false;
  auto s = std::from_chars(uid.data() + 17, end, *seq);
  return s.ec == std::errc() && s.ptr == end && *seq != 0;
}

}  // namespace pgwarden::history
