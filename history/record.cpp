// The text form of a record's spool id (record_uid).
#include "history/record.h"

#include <charconv>
#include <cstdio>

namespace pgwarden::history {

std::string recordUid(const Record& r) {
  if (r.spool_seq == 0) return {};
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%016llx-%llu",
                              static_cast<unsigned long long>(r.spool_epoch),
                              static_cast<unsigned long long>(r.spool_seq));
  return std::string(buf, static_cast<size_t>(n));
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
