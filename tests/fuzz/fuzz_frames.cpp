// libFuzzer target: the frame buffer fed a byte stream in chunks of fuzzer-chosen sizes, and every
// whole message run through every client and server decoder of protocol/. Checks that each frame
// matches its length field, that every view a decoder returns lies inside the body, and that the
// client messages the proxy re-encodes come out byte for byte as they went in.
#include <cstring>

#include "protocol/messages.h"
#include "tests/fuzz/fuzz_util.h"

namespace pgw = pgwarden::protocol;
using pgwarden::fuzz::Input;

namespace {

bool inside(std::string_view part, std::string_view whole) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

// Re-encodes a client message the way the proxy forwards or rewrites it: must equal the original.
void roundTripClient(const pgw::Frame& f) {
  std::string out;
  switch (f.type) {
    case pgw::fe::kQuery:
      if (auto m = pgw::parseQuery(f.body)) {
        PGW_FUZZ_CHECK(inside(m->sql, f.body));
        pgw::writeQuery(out, m->sql);
      }
      break;
    case pgw::fe::kParse:
      if (auto m = pgw::parseParse(f.body)) pgw::writeParse(out, m->statement, m->sql, m->param_types);
      break;
    case pgw::fe::kBind:
      if (auto m = pgw::parseBind(f.body)) {
        for (const auto& v : m->params) PGW_FUZZ_CHECK(!v || inside(*v, f.body));
        pgw::writeBind(out, *m);
      }
      break;
    case pgw::fe::kDescribe:
      if (auto m = pgw::parseDescribe(f.body)) pgw::writeDescribe(out, m->kind, m->name);
      break;
    case pgw::fe::kExecute:
      if (auto m = pgw::parseExecute(f.body)) pgw::writeExecute(out, m->portal, m->max_rows);
      break;
    case pgw::fe::kClose:
      if (auto m = pgw::parseClose(f.body)) pgw::writeClose(out, m->kind, m->name);
      break;
    default:
      return;
  }
  if (!out.empty()) PGW_FUZZ_CHECK(out == f.raw);
}

void decodeClient(const pgw::Frame& f) {
  roundTripClient(f);
  // The other decoders see every body too: a session may meet any of them in any state.
  (void)pgw::parseQuery(f.body);
  (void)pgw::parseParse(f.body);
  (void)pgw::parseBind(f.body);
  (void)pgw::parseDescribe(f.body);
  (void)pgw::parseExecute(f.body);
  (void)pgw::parseClose(f.body);
  if (auto m = pgw::parsePassword(f.body)) PGW_FUZZ_CHECK(inside(m->password, f.body));
  if (auto m = pgw::parseSaslInitial(f.body)) {
    PGW_FUZZ_CHECK(inside(m->mechanism, f.body));
    PGW_FUZZ_CHECK(inside(m->data, f.body));
  }
  (void)pgw::parseSaslResponse(f.body);
}

void decodeServer(const pgw::Frame& f) {
  if (auto m = pgw::parseErrorFields(f.body)) {
    (void)m->severity();
    (void)m->sqlstate();
    (void)m->message();
  }
  if (auto m = pgw::parseAuthRequest(f.body)) {
    PGW_FUZZ_CHECK(inside(m->data, f.body));
    for (auto mech : m->mechanisms) PGW_FUZZ_CHECK(inside(mech, f.body));
  }
  if (auto m = pgw::parseParameterStatus(f.body)) {
    std::string out;
    pgw::writeParameterStatus(out, m->name, m->value);
    PGW_FUZZ_CHECK(f.type != pgw::fe::kSync || out == f.raw);
  }
  (void)pgw::parseBackendKeyData(f.body);
  (void)pgw::parseReadyForQuery(f.body);
  if (auto m = pgw::parseCommandComplete(f.body)) PGW_FUZZ_CHECK(inside(m->tag, f.body));
  const auto rd = pgw::parseRowDescription(f.body);
  if (auto fields = pgw::parseRowDescriptionFields(f.body)) {
    PGW_FUZZ_CHECK(rd.ok() && size_t(uint16_t(rd->columns)) == fields->size());
    for (const auto& c : *fields) PGW_FUZZ_CHECK(inside(c.name, f.body));
  }
  const auto dr = pgw::parseDataRow(f.body);
  if (auto values = pgw::parseDataRowValues(f.body)) {
    PGW_FUZZ_CHECK(dr.ok() && size_t(uint16_t(dr->columns)) == values->size());
    for (const auto& v : *values) PGW_FUZZ_CHECK(!v || inside(*v, f.body));
  }
  (void)pgw::parseCopyResponse(f.body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const bool from_backend = (mode & 1) != 0;
  pgw::FrameLimits limits;
  if ((mode & 2) != 0) {  // small caps, so oversized messages are reachable
    limits.max_message = 64;
    limits.max_bind = 256;
    limits.max_backend = 512;
  }
  // Chunk sizes come from the front of the input; the stream is the rest, left whole so that
  // seeds made of real messages stay real messages.
  uint8_t sizes[8];
  for (auto& s : sizes) s = in.byte();
  const std::string_view stream = in.rest();

  pgw::FrameBuffer buf;
  size_t fed = 0, consumed = 0, turn = 0;
  while (fed < stream.size()) {
    Input pick(&sizes[turn++ % 8], 1);
    const size_t n = pick.chunk(stream.size() - fed);
    buf.append(stream.data() + fed, n);
    fed += n;
    for (;;) {
      pgw::Frame f;
      const pgw::FrameStatus st = buf.next(f, limits, from_backend);
      if (st == pgw::FrameStatus::kNeedMore) break;
      if (st != pgw::FrameStatus::kFrame) return 0;  // the session closes the connection
      PGW_FUZZ_CHECK(f.raw.size() >= 5 && f.raw.size() <= buf.size());
      PGW_FUZZ_CHECK(std::memcmp(f.raw.data(), stream.data() + consumed, f.raw.size()) == 0);
      PGW_FUZZ_CHECK(f.raw.size() - 1 == pgw::readU32(f.raw.data() + 1));
      PGW_FUZZ_CHECK(f.raw.size() - 1 <= pgw::frameCap(f.type, limits, from_backend));
      PGW_FUZZ_CHECK(f.body.data() == f.raw.data() + 5 && f.body.size() == f.raw.size() - 5);
      if (from_backend) {
        decodeServer(f);
      } else {
        decodeClient(f);
      }
      consumed += f.raw.size();
      buf.consume(f.raw.size());
    }
    PGW_FUZZ_CHECK(buf.size() == fed - consumed);
  }
  return 0;
}
