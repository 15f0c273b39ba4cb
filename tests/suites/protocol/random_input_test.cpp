// Seeded random input for every decoder, parseStartup, FrameBuffer and the SCRAM exchanges:
// purely random bytes and mutations of valid messages. Nothing may crash or read out of bounds
// (bodies are exact-size heap copies; the sanitizer build runs this too), every view a decoder
// returns must lie inside its input, and whatever a decoder accepts must re-encode to the very
// same bytes, so the decoders read exactly the layouts the encoders write.
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "protocol/auth.h"
#include "protocol/messages.h"
#include "tests/unit/protocol/test_util.h"

namespace pgwarden::protocol {
namespace {

using test::Bytes;
using test::ExactBytes;

constexpr int kBuffers = 100000;
constexpr uint64_t kSeed = 0x9e3779b97f4a7c15ull;

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(gen_); }
  uint8_t byte() { return uint8_t(below(256)); }
  bool oneIn(size_t n) { return below(n) == 0; }
  std::string bytes(size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = char(byte());
    return s;
  }

 private:
  std::mt19937_64 gen_;
};

// Values that sit on the edges of length and count checks.
constexpr uint32_t kEdgeValues[] = {0,          1,          2,          3,          4,
                                    5,          0x7fff,     0x8000,     0xffff,     0x7fffffff,
                                    0x80000000, 0xfffffffe, 0xffffffff, 0x00010000, 0x00000100};

std::string mutate(std::string s, Rng& rng) {
  const size_t rounds = 1 + rng.below(3);
  for (size_t k = 0; k < rounds; ++k) {
    switch (rng.below(7)) {
      case 0:  // flip a bit
        if (!s.empty()) s[rng.below(s.size())] ^= char(1u << rng.below(8));
        break;
      case 1:  // set a byte
        if (!s.empty()) {
          const char picks[] = {'\0', char(0xff), ',', '=', char(rng.byte())};
          s[rng.below(s.size())] = picks[rng.below(sizeof picks)];
        }
        break;
      case 2:  // truncate
        s.resize(rng.below(s.size() + 1));
        break;
      case 3:  // insert a byte
        s.insert(s.begin() + long(rng.below(s.size() + 1)), char(rng.byte()));
        break;
      case 4:  // append garbage
        s += rng.bytes(1 + rng.below(8));
        break;
      case 5:  // overwrite 2 or 4 bytes with an edge value
        if (s.size() >= 4) {
          const uint32_t v = kEdgeValues[rng.below(std::size(kEdgeValues))];
          const size_t at = rng.below(s.size() - 3);
          const bool wide = rng.oneIn(2);
          const std::string b = wide ? Bytes().u32(v).get() : Bytes().u16(uint16_t(v)).get();
          s.replace(at, b.size(), b);
        }
        break;
      default:  // erase a range
        if (!s.empty()) {
          const size_t at = rng.below(s.size());
          s.erase(at, 1 + rng.below(s.size() - at));
        }
        break;
    }
  }
  return s;
}

std::string bodyOfWire(const std::string& wire) { return wire.substr(5); }

// Valid bodies of every kind, to mutate.
std::vector<std::string> seedBodies() {
  std::vector<std::string> seeds;
  auto add = [&](auto write) {
    std::string w;
    write(w);
    seeds.push_back(bodyOfWire(w));
  };
  add([](std::string& w) { writeQuery(w, "select 1"); });
  add([](std::string& w) { writeParse(w, "S_1", "select $1,$2", {23, 25}); });
  add([](std::string& w) {
    BindMsg b;
    b.portal = "C";
    b.statement = "S_1";
    b.param_formats = {1, 0};
    b.params = {std::string_view("\x00\x00\x00\x2a", 4), std::nullopt};
    b.result_formats = {0};
    writeBind(w, b);
  });
  add([](std::string& w) { writeDescribe(w, 'S', "S_1"); });
  add([](std::string& w) { writeClose(w, 'P', "C"); });
  add([](std::string& w) { writeExecute(w, "C", 100); });
  add([](std::string& w) { writePassword(w, "md5abcdef"); });
  add([](std::string& w) { writeSaslInitial(w, "SCRAM-SHA-256", "n,,n=,r=abc"); });
  add([](std::string& w) { writeError(w, "ERROR", "42501", "permission denied", "d", "h"); });
  add([](std::string& w) { writeAuthSasl(w, {"SCRAM-SHA-256"}); });
  add([](std::string& w) {
    const uint8_t salt[4] = {1, 2, 3, 4};
    writeAuthMd5(w, salt);
  });
  add([](std::string& w) { writeAuthSaslContinue(w, "r=abc,s=c2FsdA==,i=4096"); });
  add([](std::string& w) { writeParameterStatus(w, "TimeZone", "UTC"); });
  add([](std::string& w) { writeBackendKeyData(w, 7, 9); });
  add([](std::string& w) { writeReadyForQuery(w, 'T'); });
  add([](std::string& w) { writeCommandComplete(w, "SELECT 3"); });
  add([](std::string& w) { writeRowDescription(w, {{"a", 23, 4, -1}, {"b"}}); });
  add([](std::string& w) {
    writeDataRow(w, {std::string_view("x"), std::nullopt, std::string_view("")});
  });
  seeds.push_back(Bytes().u8(0).i16(2).i16(0).i16(1).get());  // CopyOutResponse body
  return seeds;
}

// Runs every decoder on `body`, checks views and re-encoding. Returns how many accepted it.
int runDecoders(const std::string& input) {
  const ExactBytes copy(input);
  const std::string_view body = copy.view();
  int accepted = 0;
  auto reencodes = [&](const std::string& wire, const char* what) {
    EXPECT_EQ(bodyOfWire(wire), input) << what << " accepted bytes it does not re-encode to";
  };

  if (auto m = parseQuery(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->sql));
    std::string w;
    writeQuery(w, m->sql);
    reencodes(w, "Query");
  }
  if (auto m = parseParse(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->statement) && copy.holds(m->sql));
    std::string w;
    writeParse(w, m->statement, m->sql, m->param_types);
    reencodes(w, "Parse");
  }
  if (auto m = parseBind(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->portal) && copy.holds(m->statement));
    for (const auto& p : m->params) EXPECT_TRUE(!p || copy.holds(*p));
    std::string w;
    writeBind(w, *m);
    reencodes(w, "Bind");
  }
  if (auto m = parseDescribe(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->name));
    std::string w;
    writeDescribe(w, m->kind, m->name);
    reencodes(w, "Describe");
  }
  if (auto m = parseClose(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->name));
    std::string w;
    writeClose(w, m->kind, m->name);
    reencodes(w, "Close");
  }
  if (auto m = parseExecute(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->portal));
    std::string w;
    writeExecute(w, m->portal, m->max_rows);
    reencodes(w, "Execute");
  }
  if (auto m = parsePassword(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->password));
    std::string w;
    writePassword(w, m->password);
    reencodes(w, "Password");
  }
  if (auto m = parseSaslInitial(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->mechanism) && copy.holds(m->data));
    // Length -1 and length 0 both decode to empty data, so only the view is checked for them.
    if (!m->data.empty()) {
      std::string w;
      writeSaslInitial(w, m->mechanism, m->data);
      reencodes(w, "SASLInitialResponse");
    }
  }
  if (auto m = parseSaslResponse(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->data));
  }
  if (auto m = parseErrorFields(body)) {
    ++accepted;
    std::vector<Field> fields;
    for (const auto& [c, v] : m->fields) fields.push_back({c, v});
    std::string w;
    writeErrorResponse(w, fields);
    reencodes(w, "ErrorResponse");
  }
  if (auto m = parseAuthRequest(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->data));
    for (auto mech : m->mechanisms) EXPECT_TRUE(copy.holds(mech));
    std::string w;
    switch (m->code) {
      case 0:
        writeAuthOk(w);
        break;
      case 3:
        writeAuthCleartext(w);
        break;
      case 5:
        writeAuthMd5(w, reinterpret_cast<const uint8_t*>(m->data.data()));
        break;
      case 10:
        writeAuthSasl(w, m->mechanisms);
        break;
      case 11:
        writeAuthSaslContinue(w, m->data);
        break;
      case 12:
        writeAuthSaslFinal(w, m->data);
        break;
      default:
        break;
    }
    if (!w.empty()) reencodes(w, "Authentication");
  }
  if (auto m = parseParameterStatus(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->name) && copy.holds(m->value));
    std::string w;
    writeParameterStatus(w, m->name, m->value);
    reencodes(w, "ParameterStatus");
  }
  if (auto m = parseBackendKeyData(body)) {
    ++accepted;
    std::string w;
    writeBackendKeyData(w, m->pid, m->key);
    reencodes(w, "BackendKeyData");
  }
  if (auto m = parseReadyForQuery(body)) {
    ++accepted;
    std::string w;
    writeReadyForQuery(w, m->status);
    reencodes(w, "ReadyForQuery");
  }
  if (auto m = parseCommandComplete(body)) {
    ++accepted;
    EXPECT_TRUE(copy.holds(m->tag));
    std::string w;
    writeCommandComplete(w, m->tag);
    reencodes(w, "CommandComplete");
  }
  auto rd = parseRowDescription(body);
  auto rdf = parseRowDescriptionFields(body);
  EXPECT_EQ(rd.ok(), rdf.ok());
  if (rdf) {
    ++accepted;
    EXPECT_EQ(size_t(rd->columns), rdf->size());
    for (const auto& f : *rdf) EXPECT_TRUE(copy.holds(f.name));
  }
  auto dr = parseDataRow(body);
  auto drv = parseDataRowValues(body);
  EXPECT_EQ(dr.ok(), drv.ok());
  if (drv) {
    ++accepted;
    EXPECT_EQ(size_t(dr->columns), drv->size());
    for (const auto& v : *drv) EXPECT_TRUE(!v || copy.holds(*v));
    std::string w;
    writeDataRow(w, *drv);
    reencodes(w, "DataRow");
  }
  if (auto m = parseCopyResponse(body)) {
    ++accepted;
    EXPECT_EQ(body.size(), 3 + 2 * m->column_formats.size());
  }
  return accepted;
}

TEST(RandomInput, DecodersNeverCrashAndReencodeExactly) {
  Rng rng(kSeed);
  const auto seeds = seedBodies();
  long accepted = 0, mutated_accepted = 0;
  for (int i = 0; i < kBuffers; ++i) {
    std::string input;
    const bool from_seed = !rng.oneIn(3);
    if (from_seed) {
      input = mutate(seeds[rng.below(seeds.size())], rng);
    } else {
      input = rng.bytes(rng.oneIn(10) ? rng.below(600) : rng.below(40));
    }
    const int n = runDecoders(input);
    accepted += n;
    if (from_seed) mutated_accepted += n;
    if (HasFailure()) FAIL() << "iteration " << i;
  }
  // Not a pass criterion for safety, but proof the mutations reach past the first checks.
  EXPECT_GT(mutated_accepted, kBuffers / 10);
  RecordProperty("accepted", std::to_string(accepted));
}

TEST(RandomInput, StartupNeverCrashesAndReencodes) {
  Rng rng(kSeed + 1);
  std::vector<std::string> seeds;
  std::string w;
  writeStartup(w, {{"user", "alice"}, {"database", "db"}, {"options", "-c agent_id=x"}});
  seeds.push_back(w);
  w.clear();
  writeSslRequest(w);
  seeds.push_back(w);
  w.clear();
  writeCancelRequest(w, 12, 34);
  seeds.push_back(w);
  int packets = 0;
  for (int i = 0; i < kBuffers / 4; ++i) {
    std::string input;
    if (rng.oneIn(3)) {
      // A plausible length prefix so the body checks are reached.
      input = rng.bytes(4 + rng.below(60));
      const std::string len = Bytes().u32(uint32_t(input.size() + (rng.oneIn(4) ? 1 : 0))).get();
      input.replace(0, 4, len);
    } else {
      input = mutate(seeds[rng.below(seeds.size())], rng);
    }
    const ExactBytes copy(input);
    StartupPacket pkt;
    size_t used = 0;
    std::string error;
    const StartupStatus st = parseStartup(copy.view(), pkt, used, error);
    if (st == StartupStatus::kBad) {
      EXPECT_FALSE(error.empty());
      continue;
    }
    if (st == StartupStatus::kNeedMore) {
      EXPECT_TRUE(input.size() < 4 || readU32(input.data()) > input.size()) << i;
      continue;
    }
    ++packets;
    ASSERT_LE(used, input.size());
    ASSERT_EQ(used, readU32(input.data()));
    std::string again;
    switch (pkt.kind) {
      case StartupKind::kStartup:
        if (pkt.version != kProtocolV3) continue;
        writeStartup(again, pkt.params);
        break;
      case StartupKind::kSslRequest:
        writeSslRequest(again);
        break;
      case StartupKind::kGssEncRequest:
        writeGssEncRequest(again);
        break;
      case StartupKind::kCancel:
        writeCancelRequest(again, pkt.cancel_pid, pkt.cancel_key);
        break;
    }
    ASSERT_EQ(again, input.substr(0, used)) << "iteration " << i;
  }
  EXPECT_GT(packets, 100);
}

TEST(RandomInput, FrameBufferNeverCrashes) {
  Rng rng(kSeed + 2);
  std::string valid;
  writeQuery(valid, "select 1");
  writeSync(valid);
  writeDataRow(valid, {std::string_view("abc")});
  int frames = 0, rejected = 0;
  for (int i = 0; i < kBuffers / 10; ++i) {
    // A stream of valid messages with random bytes and mutations mixed in, small random caps,
    // delivered in random chunks.
    std::string stream;
    for (size_t k = 0, parts = 1 + rng.below(6); k < parts; ++k) {
      switch (rng.below(3)) {
        case 0:
          stream += valid;
          break;
        case 1:
          stream += mutate(valid, rng);
          break;
        default:
          stream += rng.bytes(rng.below(30));
          break;
      }
    }
    const FrameLimits limits{uint32_t(4 + rng.below(64)), uint32_t(4 + rng.below(128)),
                             uint32_t(4 + rng.below(256))};
    const bool backend = rng.oneIn(2);
    FrameBuffer fb;
    size_t fed = 0;
    while (fed < stream.size()) {
      const size_t n = std::min(stream.size() - fed, 1 + rng.below(16));
      fb.append(stream.data() + fed, n);
      fed += n;
      Frame f;
      for (;;) {
        const FrameStatus st = fb.next(f, limits, backend);
        if (st == FrameStatus::kNeedMore) {
          ASSERT_TRUE(fb.size() < 5 || readU32(fb.data() + 1) + 1 > fb.size());
          break;
        }
        if (st != FrameStatus::kFrame) {
          const uint32_t len = readU32(fb.data() + 1);
          if (st == FrameStatus::kBadLength) {
            ASSERT_LT(len, 4u);
          } else {
            ASSERT_GT(len, frameCap(fb.data()[0], limits, backend));
          }
          ++rejected;
          fb.clear();  // what a session does: error and disconnect
          break;
        }
        ++frames;
        ASSERT_EQ(f.raw.data(), fb.data());
        ASSERT_EQ(f.raw.size(), size_t(readU32(f.raw.data() + 1)) + 1);
        ASSERT_LE(f.raw.size(), fb.size());
        ASSERT_LE(f.raw.size() - 1, frameCap(f.type, limits, backend));
        fb.consume(f.raw.size());
      }
    }
  }
  EXPECT_GT(frames, 1000);
  EXPECT_GT(rejected, 1000);
}

TEST(RandomInput, ScramServerFailsCleanlyOnMutatedMessages) {
  Rng rng(kSeed + 3);
  auto verifier = parseScramVerifier(makeScramVerifierWithSalt("pw", "0123456789abcdef", 64));
  ASSERT_TRUE(verifier);
  ScramClient client("", "pw");
  client.setNonceForTest("clientnonce");
  const std::string first = client.clientFirst();
  ScramServer reference(*verifier);
  reference.setNonceForTest("servernonce");
  auto server_first = reference.handleClientFirst(first);
  ASSERT_TRUE(server_first);
  auto final_msg = client.handleServerFirst(*server_first);
  ASSERT_TRUE(final_msg);
  ASSERT_TRUE(reference.handleClientFinal(*final_msg));

  int first_ok = 0;
  for (int i = 0; i < kBuffers / 5; ++i) {
    ScramServer s(*verifier);
    s.setNonceForTest("servernonce");
    if (rng.oneIn(2)) {
      const std::string m = mutate(first, rng);
      auto r = s.handleClientFirst(m);
      if (r) {
        ++first_ok;
        EXPECT_EQ(r->rfind("r=", 0), 0u);
      }
      auto f = s.handleClientFinal(mutate(*final_msg, rng));
      (void)f;  // may pass only if the mutations happened to cancel out; must not crash
    } else {
      ASSERT_TRUE(s.handleClientFirst(first));
      const std::string m = mutate(*final_msg, rng);
      auto r = s.handleClientFinal(m);
      // The whole client-final message is covered by the proof: any change must fail.
      ASSERT_EQ(r.ok(), m == *final_msg) << "iteration " << i << ": " << m;
      EXPECT_EQ(s.succeeded(), r.ok());
    }
  }
  EXPECT_GT(first_ok, 100);
}

TEST(RandomInput, ScramClientFailsCleanlyOnMutatedMessages) {
  Rng rng(kSeed + 4);
  // Few rounds of PBKDF2 so accepted mutations stay cheap.
  auto verifier = parseScramVerifier(makeScramVerifierWithSalt("pw", "saltsaltsalt", 16));
  ASSERT_TRUE(verifier);
  for (int i = 0; i < 2000; ++i) {
    ScramClient client("", "pw");
    client.setNonceForTest("cn");
    ScramServer server(*verifier);
    server.setNonceForTest("sn");
    auto sf = server.handleClientFirst(client.clientFirst());
    ASSERT_TRUE(sf);
    if (rng.oneIn(2)) {
      auto r = client.handleServerFirst(mutate(*sf, rng));
      if (r) {
        EXPECT_EQ(r->rfind("c=biws,r=cn", 0), 0u);
      }
    } else {
      auto cf = client.handleServerFirst(*sf);
      ASSERT_TRUE(cf);
      auto fin = server.handleClientFinal(*cf);
      ASSERT_TRUE(fin);
      const std::string m = mutate(*fin, rng);
      const Status st = client.verifyServerFinal(m);
      ASSERT_EQ(st.ok(), m == *fin) << m;
    }
  }
}

}  // namespace
}  // namespace pgwarden::protocol
