// Record <-> spool bytes. One list of the string fields drives size, encode and decode, so the
// three cannot drift apart.
#include "history/spool_codec.h"

#include <array>
#include <cstring>
#include <string>
#include <string_view>

namespace pgwarden::history {

namespace {

// The strings every record carries, in the order they are encoded: one list for the record and
// its view.
template <class R, class S>
constexpr std::array<S R::*, 18> codecStrings() {
  return {&R::instance_id,       &R::user,
          &R::database,          &R::policy_group,
          &R::client_addr,       &R::application_name,
          &R::agent_id,          &R::conversation_id,
          &R::query_intent_sent, &R::query_intent_inferred,
          &R::statement_kind,    &R::sql_text,
          &R::fingerprint,       &R::guard_actions,
          &R::deny_code,         &R::sqlstate,
          &R::error_message,     &R::protocol};
}
constexpr auto kStrings = codecStrings<Record, std::string>();
constexpr auto kViewStrings = codecStrings<RecordView, std::string_view>();

// started, finished, duration, session, rows_returned, rows_affected, bytes_sent; outcome and
// flags; the table count.
constexpr size_t kFixedBytes = 7 * 8 + 2 + 4;

constexpr uint8_t kSqlTruncated = 1;
constexpr uint8_t kResultTruncated = 2;
constexpr uint8_t kSingleZero = 4;
constexpr uint8_t kToolFields = 8;  // tool_name and tool_args follow the tables
constexpr uint8_t kRequestFields = 16;  // request_id and traceparent follow those
constexpr uint8_t kHostField = 32;      // host follows those
constexpr uint8_t kOutcomeCount = static_cast<uint8_t>(Outcome::kAborted) + 1;

class Writer {
 public:
  explicit Writer(uint8_t* out) : p_(out) {}
  template <typename T>
  void put(T v) {
    std::memcpy(p_, &v, sizeof v);
    p_ += sizeof v;
  }
  void text(std::string_view s) {
    put(static_cast<uint32_t>(s.size()));
    if (!s.empty()) std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }

 private:
  uint8_t* p_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  template <typename T>
  bool get(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool text(std::string* s) {
    uint32_t n = 0;
    if (!get(&n) || static_cast<size_t>(end_ - p_) < n) return false;
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool done() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// The tool fields ride after the tables, flagged, only when set, so a record without them is
// encoded as older pgwarden versions encoded it and their spools still decode.
bool hasTrailer(const RecordView& r) { return !r.tool_name.empty() || !r.tool_args.empty(); }
bool hasRequest(const RecordView& r) { return !r.request_id.empty() || !r.traceparent.empty(); }
bool hasHost(const RecordView& r) { return !r.host.empty(); }

}  // namespace

size_t encodedSize(const Record& r) { return encodedSize(viewOf(r)); }

void encodeRecord(const Record& r, uint8_t* out) { encodeRecord(viewOf(r), out); }

size_t encodedSize(const RecordView& r) {
  size_t n = kFixedBytes;
  for (auto field : kViewStrings) n += 4 + (r.*field).size();
  for (const auto& t : r.tables) n += 4 + t.size();
  if (hasTrailer(r)) n += 8 + r.tool_name.size() + r.tool_args.size();
  if (hasRequest(r)) n += 8 + r.request_id.size() + r.traceparent.size();
  if (hasHost(r)) n += 4 + r.host.size();
  return n;
}

void encodeRecord(const RecordView& r, uint8_t* out) {
  Writer w(out);
  w.put(r.started_at_us);
  w.put(r.finished_at_us);
  w.put(r.duration_us);
  w.put(r.session_id);
  w.put(r.rows_returned);
  w.put(r.rows_affected);
  w.put(r.bytes_sent);
  w.put(static_cast<uint8_t>(r.outcome));
  w.put(static_cast<uint8_t>((r.sql_truncated ? kSqlTruncated : 0) |
                             (r.truncated ? kResultTruncated : 0) |
                             (r.single_zero ? kSingleZero : 0) | (hasTrailer(r) ? kToolFields : 0) |
                             (hasRequest(r) ? kRequestFields : 0) | (hasHost(r) ? kHostField : 0)));
  w.put(static_cast<uint32_t>(r.tables.size()));
  for (auto field : kViewStrings) w.text(r.*field);
  for (const auto& t : r.tables) w.text(t);
  if (hasTrailer(r)) {
    w.text(r.tool_name);
    w.text(r.tool_args);
  }
  if (hasRequest(r)) {
    w.text(r.request_id);
    w.text(r.traceparent);
  }
  if (hasHost(r)) w.text(r.host);
}

bool decodeRecord(const uint8_t* body, size_t size, Record* out) {
  // `out` may be a record decoded before (the writer reuses its batch): every field is set, and
  // strings are assigned in place so their storage is reused.
  Reader in(body, size);
  uint8_t outcome = 0;
  uint8_t flags = 0;
  uint32_t tables = 0;
  if (!in.get(&out->started_at_us) || !in.get(&out->finished_at_us) || !in.get(&out->duration_us) ||
      !in.get(&out->session_id) || !in.get(&out->rows_returned) || !in.get(&out->rows_affected) ||
      !in.get(&out->bytes_sent) || !in.get(&outcome) || !in.get(&flags) || !in.get(&tables)) {
    return false;
  }
  if (outcome >= kOutcomeCount) return false;
  out->outcome = static_cast<Outcome>(outcome);
  out->sql_truncated = (flags & kSqlTruncated) != 0;
  out->truncated = (flags & kResultTruncated) != 0;
  out->single_zero = (flags & kSingleZero) != 0;
  for (auto field : kStrings) {
    if (!in.text(&(out->*field))) return false;
  }
  // Each table takes at least its 4-byte length: a count the body cannot hold is refused before
  // anything is reserved for it.
  if (tables > size / 4) return false;
  out->tables.resize(tables);
  for (auto& t : out->tables) {
    if (!in.text(&t)) return false;
  }
  // The tool fields came later: a record without them (or from an older spool) ends here.
  if ((flags & kToolFields) != 0) {
    if (!in.text(&out->tool_name) || !in.text(&out->tool_args)) return false;
  } else {
    out->tool_name.clear();
    out->tool_args.clear();
  }
  if ((flags & kRequestFields) != 0) {
    if (!in.text(&out->request_id) || !in.text(&out->traceparent)) return false;
  } else {
    out->request_id.clear();
    out->traceparent.clear();
  }
  if ((flags & kHostField) != 0) {
    if (!in.text(&out->host)) return false;
  } else {
    out->host.clear();
  }
  out->result_warnings.clear();  // not in the spool: the `warnings` count comes from guard_actions
  return in.done();
}

}  // namespace pgwarden::history
