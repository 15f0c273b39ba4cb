// FrameBuffer: a stream of messages fed whole, byte by byte, split at every offset and
// concatenated in random chunks yields the same frames; caps are enforced from the header alone.
#include <random>
#include <string>
#include <vector>

#include "protocol/messages.h"
#include "test_util.h"

namespace pgwarden::protocol {
namespace {

using test::Bytes;

// A client stream as JDBC pipelines it, plus messages with empty bodies.
std::string clientStream() {
  std::string s;
  writeParse(s, "S_1", "select $1::int, $2::text", {23, 25});
  BindMsg b;
  b.statement = "S_1";
  b.param_formats = {0};
  b.params = {std::string_view("42"), std::nullopt};
  writeBind(s, b);
  writeDescribe(s, 'P', "");
  writeExecute(s, "", 0);
  writeSync(s);
  writeQuery(s, "select 1");
  writeFlush(s);
  writeCopyData(s, std::string(3000, 'x'));
  writeTerminate(s);
  return s;
}

// What the stream holds, message by message, split by hand from the length fields.
std::vector<std::string> splitByHand(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = readU32(s.data() + i + 1);
    out.push_back(s.substr(i, len + 1));
    i += len + 1;
  }
  return out;
}

// Takes every whole frame out of `fb`; fails the test on anything but kFrame / kNeedMore.
void drain(FrameBuffer& fb, std::vector<std::string>& got, bool from_backend = false) {
  FrameLimits limits;
  Frame f;
  for (;;) {
    const FrameStatus st = fb.next(f, limits, from_backend);
    if (st == FrameStatus::kNeedMore) return;
    ASSERT_EQ(st, FrameStatus::kFrame);
    ASSERT_EQ(f.raw.size(), f.body.size() + 5);
    ASSERT_EQ(f.raw[0], f.type);
    ASSERT_EQ(f.raw.data() + 5, f.body.data());
    got.emplace_back(f.raw);
    fb.consume(f.raw.size());
  }
}

TEST(FrameBuffer, WholeStream) {
  const std::string s = clientStream();
  const auto want = splitByHand(s);
  ASSERT_EQ(want.size(), 9u);
  FrameBuffer fb;
  fb.append(s.data(), s.size());
  std::vector<std::string> got;
  drain(fb, got);
  EXPECT_EQ(got, want);
  EXPECT_EQ(fb.size(), 0u);
}

TEST(FrameBuffer, ByteByByte) {
  const std::string s = clientStream();
  FrameBuffer fb;
  std::vector<std::string> got;
  for (char c : s) {
    fb.append(&c, 1);
    drain(fb, got);
  }
  EXPECT_EQ(got, splitByHand(s));
  EXPECT_EQ(fb.size(), 0u);
}

TEST(FrameBuffer, SplitAtEveryOffset) {
  const std::string s = clientStream();
  const auto want = splitByHand(s);
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    FrameBuffer fb;
    std::vector<std::string> got;
    fb.append(s.data(), cut);
    drain(fb, got);
    fb.append(s.data() + cut, s.size() - cut);
    drain(fb, got);
    ASSERT_EQ(got, want) << "cut at " << cut;
    ASSERT_EQ(fb.size(), 0u);
  }
}

TEST(FrameBuffer, ConcatenatedInRandomChunks) {
  // 200 copies of the stream back to back, delivered in chunks of 1..4096 bytes as reads would.
  const std::string one = clientStream();
  std::string s;
  for (int i = 0; i < 200; ++i) s += one;
  std::mt19937 rng(12345);
  std::uniform_int_distribution<size_t> chunk(1, 4096);
  FrameBuffer fb;
  std::vector<std::string> got;
  size_t max_capacity = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::min(chunk(rng), s.size() - i);
    fb.append(s.data() + i, n);
    i += n;
    drain(fb, got);
    max_capacity = std::max(max_capacity, fb.capacity());
  }
  EXPECT_EQ(got, splitByHand(s));
  // Lazy compaction keeps the buffer near one read plus one partial message, not the stream.
  EXPECT_LT(max_capacity, 64u * 1024) << "buffer grew with the stream: " << max_capacity;
}

TEST(FrameBuffer, BackendStream) {
  std::string s;
  writeParameterStatus(s, "client_encoding", "UTF8");
  writeBackendKeyData(s, 1234, 5678);
  writeReadyForQuery(s, 'I');
  writeRowDescription(s, {{"a"}, {"b", 23, 4, -1}});
  for (int i = 0; i < 50; ++i) writeDataRow(s, {std::string_view("x"), std::nullopt});
  writeCommandComplete(s, "SELECT 50");
  writeReadyForQuery(s, 'I');
  const auto want = splitByHand(s);
  for (size_t cut = 0; cut <= s.size(); cut += 7) {
    FrameBuffer fb;
    std::vector<std::string> got;
    fb.append(s.data(), cut);
    drain(fb, got, true);
    fb.append(s.data() + cut, s.size() - cut);
    drain(fb, got, true);
    ASSERT_EQ(got, want) << "cut at " << cut;
  }
}

TEST(FrameBuffer, NeedsFiveBytesForAHeader) {
  const std::string s = Bytes().str("select 1").message('Q');
  FrameBuffer fb;
  Frame f;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(fb.next(f, FrameLimits{}, false), FrameStatus::kNeedMore);
    fb.append(s.data() + i, 1);
  }
  EXPECT_EQ(fb.next(f, FrameLimits{}, false), FrameStatus::kNeedMore);
}

TEST(FrameBuffer, LengthBelowFourIsBad) {
  for (uint32_t len = 0; len < 4; ++len) {
    const std::string s = Bytes().u8('Q').u32(len).get();
    FrameBuffer fb;
    fb.append(s.data(), s.size());
    Frame f;
    EXPECT_EQ(fb.next(f, FrameLimits{}, false), FrameStatus::kBadLength) << len;
    EXPECT_EQ(fb.next(f, FrameLimits{}, true), FrameStatus::kBadLength) << len;
  }
}

TEST(FrameBuffer, EmptyBodyIsAFrame) {
  const std::string s = Bytes().u8('S').u32(4).get();
  FrameBuffer fb;
  fb.append(s.data(), s.size());
  Frame f;
  ASSERT_EQ(fb.next(f, FrameLimits{}, false), FrameStatus::kFrame);
  EXPECT_EQ(f.type, 'S');
  EXPECT_TRUE(f.body.empty());
  EXPECT_EQ(f.raw.size(), 5u);
}

// Only the 5-byte header is appended: the verdict must come before any body byte arrives.
FrameStatus headerVerdict(char type, uint32_t len, const FrameLimits& limits, bool backend) {
  const std::string s = Bytes().u8(uint8_t(type)).u32(len).get();
  FrameBuffer fb;
  fb.append(s.data(), s.size());
  Frame f;
  return fb.next(f, limits, backend);
}

TEST(FrameBuffer, OversizedRejectedFromHeaderAlone) {
  const FrameLimits d;  // defaults: 1 MiB, 64 MiB, 1 GiB
  for (char t : {'Q', 'P', 'D', 'E', 'X', 'p', '?'}) {
    EXPECT_EQ(headerVerdict(t, d.max_message, d, false), FrameStatus::kNeedMore) << t;
    EXPECT_EQ(headerVerdict(t, d.max_message + 1, d, false), FrameStatus::kTooLarge) << t;
  }
  for (char t : {'B', 'd', 'F'}) {
    EXPECT_EQ(headerVerdict(t, d.max_message + 1, d, false), FrameStatus::kNeedMore) << t;
    EXPECT_EQ(headerVerdict(t, d.max_bind, d, false), FrameStatus::kNeedMore) << t;
    EXPECT_EQ(headerVerdict(t, d.max_bind + 1, d, false), FrameStatus::kTooLarge) << t;
  }
  for (char t : {'D', 'T', 'E', 'd', 'Q'}) {
    EXPECT_EQ(headerVerdict(t, d.max_bind + 1, d, true), FrameStatus::kNeedMore) << t;
    EXPECT_EQ(headerVerdict(t, d.max_backend, d, true), FrameStatus::kNeedMore) << t;
    EXPECT_EQ(headerVerdict(t, d.max_backend + 1, d, true), FrameStatus::kTooLarge) << t;
  }
  EXPECT_EQ(headerVerdict('D', 0xffffffffu, d, true), FrameStatus::kTooLarge);
  EXPECT_EQ(headerVerdict('B', 0xffffffffu, d, false), FrameStatus::kTooLarge);
}

TEST(FrameBuffer, ConfiguredCaps) {
  const FrameLimits l{100, 200, 300};
  EXPECT_EQ(headerVerdict('Q', 100, l, false), FrameStatus::kNeedMore);
  EXPECT_EQ(headerVerdict('Q', 101, l, false), FrameStatus::kTooLarge);
  EXPECT_EQ(headerVerdict('B', 200, l, false), FrameStatus::kNeedMore);
  EXPECT_EQ(headerVerdict('B', 201, l, false), FrameStatus::kTooLarge);
  EXPECT_EQ(headerVerdict('T', 300, l, true), FrameStatus::kNeedMore);
  EXPECT_EQ(headerVerdict('T', 301, l, true), FrameStatus::kTooLarge);
  EXPECT_EQ(frameCap('F', l, false), 200u);
  EXPECT_EQ(frameCap('d', l, false), 200u);
  EXPECT_EQ(frameCap('d', l, true), 300u);
  EXPECT_EQ(frameCap('S', l, false), 100u);

  // A message exactly at the cap is delivered once whole.
  std::string q = Bytes().raw(std::string(95, 'a')).str("").message('Q');  // length 4+96 = 100
  ASSERT_EQ(readU32(q.data() + 1), 100u);
  FrameBuffer fb;
  fb.append(q.data(), q.size());
  Frame f;
  EXPECT_EQ(fb.next(f, l, false), FrameStatus::kFrame);
}

TEST(FrameBuffer, ConsumePartialAndClamp) {
  std::string s;
  writeSync(s);
  writeQuery(s, "select 1");
  FrameBuffer fb;
  fb.append(s.data(), s.size());
  fb.consume(5);  // the Sync
  Frame f;
  ASSERT_EQ(fb.next(f, FrameLimits{}, false), FrameStatus::kFrame);
  EXPECT_EQ(f.type, 'Q');
  fb.consume(1000);  // more than held: clamped, buffer empty and reusable
  EXPECT_EQ(fb.size(), 0u);
  fb.append(s.data(), 5);
  ASSERT_EQ(fb.next(f, FrameLimits{}, false), FrameStatus::kFrame);
  EXPECT_EQ(f.type, 'S');
  fb.clear();
  EXPECT_EQ(fb.size(), 0u);
}

TEST(FrameBuffer, LargeMessageCapacityIsGivenBack) {
  std::string big;
  writeDataRow(big, {std::string_view(std::string(4u << 20, 'z'))});
  FrameBuffer fb;
  std::vector<std::string> got;
  for (size_t i = 0; i < big.size(); i += 65536) {
    fb.append(big.data() + i, std::min<size_t>(65536, big.size() - i));
    drain(fb, got, true);
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], big);
  EXPECT_LE(fb.capacity(), FrameBuffer::kKeepCapacity);
}

}  // namespace
}  // namespace pgwarden::protocol
