// The text form of a record's spool id (record_uid).
#include "history/record.h"

#include <array>
#include <charconv>
#include <cstring>

namespace pgwarden::history {

namespace {

size_t heapBytes(const std::string& s) {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;  // not the inline buffer
}

// A record's string fields (const or not, as `r` is).
template <class R>
auto stringFields(R& r) {
  return std::array{&r.instance_id,       &r.user,
                    &r.database,          &r.policy_group,
                    &r.client_addr,       &r.application_name,
                    &r.agent_id,          &r.conversation_id,
                    &r.query_intent_sent, &r.query_intent_inferred,
                    &r.statement_kind,    &r.sql_text,
                    &r.fingerprint,       &r.guard_actions,
                    &r.deny_code,         &r.sqlstate,
                    &r.error_message,     &r.protocol,
                    &r.tool_name,         &r.tool_args,
                    &r.request_id,        &r.traceparent,
                    &r.host};
}

// The fields that are not strings or lists, from a record or view to another.
template <class From, class To>
void copyScalars(const From& f, To& t) {
  t.started_at_us = f.started_at_us;
  t.finished_at_us = f.finished_at_us;
  t.duration_us = f.duration_us;
  t.session_id = f.session_id;
  t.sql_truncated = f.sql_truncated;
  t.outcome = f.outcome;
  t.rows_returned = f.rows_returned;
  t.truncated = f.truncated;
  t.rows_affected = f.rows_affected;
  t.bytes_sent = f.bytes_sent;
  t.single_zero = f.single_zero;
  t.spool_epoch = f.spool_epoch;
  t.spool_seq = f.spool_seq;
}

}  // namespace

// Measured with GCC 12 / libstdc++ on x86-64: a record that grew has a field copyScalars or
// stringFields does not know of yet.
#if defined(__x86_64__) && defined(__GLIBCXX__)
static_assert(sizeof(Record) == 888, "a new record field: add it to copyScalars or stringFields");
#endif

RecordView viewOf(const Record& r) {
  RecordView v;
  copyScalars(r, v);
  const auto from = stringFields(r);
  const auto to = stringFields(v);
  for (size_t i = 0; i < from.size(); ++i) *to[i] = *from[i];
  v.tables = r.tables;
  v.result_warnings = r.result_warnings;
  return v;
}

void assignRecord(Record& r, const RecordView& v) {
  copyScalars(v, r);
  const auto from = stringFields(v);
  const auto to = stringFields(r);
  for (size_t i = 0; i < from.size(); ++i) to[i]->assign(from[i]->data(), from[i]->size());
  r.tables.assign(v.tables.begin(), v.tables.end());
  r.result_warnings.assign(v.result_warnings.begin(), v.result_warnings.end());
}

size_t heldBytes(const Record& r) {
  size_t n = r.tables.capacity() * sizeof(std::string) +
             r.result_warnings.capacity() * sizeof(std::string);
  for (const std::string* s : stringFields(r)) n += heapBytes(*s);
  for (const auto& t : r.tables) n += heapBytes(t);
  for (const auto& w : r.result_warnings) n += heapBytes(w);
  return n;
}

std::string_view formatRecordUid(uint64_t spool_epoch, uint64_t spool_seq, char* buf, size_t size) {
  if (spool_seq == 0 || size < 40) return {};
  // The epoch zero-padded to 16 hex digits, as parseRecordUid expects.
  char hex[16];
  const auto e = std::to_chars(hex, hex + sizeof hex, spool_epoch, 16);
  const size_t pad = sizeof hex - static_cast<size_t>(e.ptr - hex);
  std::memset(buf, '0', pad);
  std::memcpy(buf + pad, hex, static_cast<size_t>(e.ptr - hex));
  buf[16] = '-';
  const auto s = std::to_chars(buf + 17, buf + size, spool_seq);
  return {buf, static_cast<size_t>(s.ptr - buf)};
}

std::string_view formatRecordUid(const Record& r, char* buf, size_t size) {
  return formatRecordUid(r.spool_epoch, r.spool_seq, buf, size);
}

std::string recordUid(const Record& r) {
  char buf[40];
  return std::string(formatRecordUid(r, buf, sizeof buf));
}

std::string recordUid(uint64_t spool_epoch, uint64_t spool_seq) {
  char buf[40];
  return std::string(formatRecordUid(spool_epoch, spool_seq, buf, sizeof buf));
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
