// parseStartup: StartupMessage (3.0 and newer minors), SSLRequest, GSSENCRequest, CancelRequest,
// and the layouts PostgreSQL refuses (version 2, bad lengths, missing terminators, odd pairs).
#include <string>

#include "protocol/messages.h"
#include "test_util.h"

namespace pgwarden::protocol {
namespace {

using test::Bytes;
using test::ExactBytes;

// An untyped packet: Int32 length (including itself), then `body`.
std::string packet(const std::string& body) {
  return Bytes().u32(uint32_t(body.size() + 4)).raw(body).get();
}

struct Parsed {
  StartupStatus status;
  StartupPacket pkt;
  size_t used = 0;
  std::string error;
};

Parsed parse(const std::string& data) {
  ExactBytes copy(data);
  Parsed p;
  p.status = parseStartup(copy.view(), p.pkt, p.used, p.error);
  return p;
}

TEST(Startup, StartupMessageWithParameters) {
  const std::string pkt = packet(Bytes()
                                     .u32(kProtocolV3)
                                     .str("user")
                                     .str("alice")
                                     .str("database")
                                     .str("analytics")
                                     .str("options")
                                     .str("-c agent_id=a1 -c conversation_id=c9")
                                     .str("application_name")
                                     .str("")
                                     .u8(0)
                                     .get());
  const Parsed p = parse(pkt);
  ASSERT_EQ(p.status, StartupStatus::kPacket) << p.error;
  EXPECT_EQ(p.used, pkt.size());
  EXPECT_EQ(p.pkt.kind, StartupKind::kStartup);
  EXPECT_EQ(p.pkt.version, kProtocolV3);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"user", "alice"},
      {"database", "analytics"},
      {"options", "-c agent_id=a1 -c conversation_id=c9"},
      {"application_name", ""}};
  EXPECT_EQ(p.pkt.params, want);
}

TEST(Startup, EncoderRoundTrip) {
  const std::vector<std::pair<std::string, std::string>> params = {
      {"user", "bob"}, {"database", "db"}, {"client_encoding", "UTF8"}};
  std::string wire;
  writeStartup(wire, params);
  const Parsed p = parse(wire);
  ASSERT_EQ(p.status, StartupStatus::kPacket) << p.error;
  EXPECT_EQ(p.used, wire.size());
  EXPECT_EQ(p.pkt.version, kProtocolV3);
  EXPECT_EQ(p.pkt.params, params);
}

TEST(Startup, NoParametersIsJustTheTerminator) {
  const Parsed p = parse(packet(Bytes().u32(kProtocolV3).u8(0).get()));
  ASSERT_EQ(p.status, StartupStatus::kPacket) << p.error;
  EXPECT_TRUE(p.pkt.params.empty());
}

TEST(Startup, SslRequest) {
  std::string wire;
  writeSslRequest(wire);
  EXPECT_EQ(wire, Bytes().u32(8).u32(80877103).get());
  const Parsed p = parse(wire);
  ASSERT_EQ(p.status, StartupStatus::kPacket) << p.error;
  EXPECT_EQ(p.pkt.kind, StartupKind::kSslRequest);
  EXPECT_EQ(p.used, 8u);
}

TEST(Startup, GssEncRequest) {
  std::string wire;
  writeGssEncRequest(wire);
  EXPECT_EQ(wire, Bytes().u32(8).u32(80877104).get());
  const Parsed p = parse(wire);
  ASSERT_EQ(p.status, StartupStatus::kPacket) << p.error;
  EXPECT_EQ(p.pkt.kind, StartupKind::kGssEncRequest);
}

TEST(Startup, CancelRequest) {
  std::string wire;
  writeCancelRequest(wire, 4242, -17);
  EXPECT_EQ(wire, Bytes().u32(16).u32(80877102).i32(4242).i32(-17).get());
  const Parsed p = parse(wire);
  ASSERT_EQ(p.status, StartupStatus::kPacket) << p.error;
  EXPECT_EQ(p.pkt.kind, StartupKind::kCancel);
  EXPECT_EQ(p.pkt.cancel_pid, 4242);
  EXPECT_EQ(p.pkt.cancel_key, -17);
  EXPECT_EQ(p.used, 16u);
}

TEST(Startup, SslRequestThenStartupInOneRead) {
  // Only the first packet is taken; `used` tells the caller where the next one starts.
  std::string wire;
  writeSslRequest(wire);
  writeStartup(wire, {{"user", "u"}});
  const Parsed p = parse(wire);
  ASSERT_EQ(p.status, StartupStatus::kPacket);
  EXPECT_EQ(p.pkt.kind, StartupKind::kSslRequest);
  EXPECT_EQ(p.used, 8u);
  const Parsed q = parse(wire.substr(p.used));
  ASSERT_EQ(q.status, StartupStatus::kPacket) << q.error;
  EXPECT_EQ(q.pkt.kind, StartupKind::kStartup);
}

TEST(Startup, NewerMinorVersionIsKept) {
  const uint32_t v32 = (3u << 16) | 2u;
  const Parsed p =
      parse(packet(Bytes().u32(v32).str("user").str("u").str("_pq_.thing").str("1").u8(0).get()));
  ASSERT_EQ(p.status, StartupStatus::kPacket) << p.error;
  EXPECT_EQ(p.pkt.version, v32);
  EXPECT_EQ(protocolMajor(p.pkt.version), 3);
  EXPECT_EQ(protocolMinor(p.pkt.version), 2);
  ASSERT_EQ(p.pkt.params.size(), 2u);
  EXPECT_EQ(p.pkt.params[1].first, "_pq_.thing");
}

TEST(Startup, Version2Rejected) {
  const Parsed p = parse(packet(Bytes().u32(2u << 16).str("user").str("u").u8(0).get()));
  EXPECT_EQ(p.status, StartupStatus::kBad);
  EXPECT_NE(p.error.find("unsupported frontend protocol 2.0"), std::string::npos) << p.error;
  EXPECT_EQ(parse(packet(Bytes().u32(4u << 16).u8(0).get())).status, StartupStatus::kBad);
  EXPECT_EQ(parse(packet(Bytes().u32(0).u8(0).get())).status, StartupStatus::kBad);
}

TEST(Startup, NeedMoreUntilWhole) {
  std::string wire;
  writeStartup(wire, {{"user", "alice"}, {"database", "d"}});
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_EQ(parse(wire.substr(0, n)).status, StartupStatus::kNeedMore) << n;
  }
  EXPECT_EQ(parse(wire).status, StartupStatus::kPacket);
}

TEST(Startup, LengthBounds) {
  for (uint32_t len : {0u, 4u, 7u}) {
    const Parsed p = parse(Bytes().u32(len).u32(kProtocolV3).get());
    EXPECT_EQ(p.status, StartupStatus::kBad) << len;
  }
  // Too long: judged from the length field alone, before the rest arrives.
  const Parsed big = parse(Bytes().u32(kMaxStartupPacket + 1).u32(kProtocolV3).get());
  EXPECT_EQ(big.status, StartupStatus::kBad);
  EXPECT_NE(big.error.find("invalid length"), std::string::npos);
  EXPECT_EQ(parse(Bytes().u32(0xffffffffu).get()).status, StartupStatus::kBad);
  // Exactly at the cap is fine.
  std::string body = Bytes().u32(kProtocolV3).str("user").str("u").str("application_name").get();
  const size_t fill = kMaxStartupPacket - 4 - body.size() - 2;
  body = Bytes().raw(body).raw(std::string(fill, 'a')).u8(0).u8(0).get();
  const std::string at_cap = packet(body);
  ASSERT_EQ(at_cap.size(), kMaxStartupPacket);
  EXPECT_EQ(parse(at_cap).status, StartupStatus::kPacket);
}

TEST(Startup, MissingFinalTerminatorRejected) {
  const Parsed p = parse(packet(Bytes().u32(kProtocolV3).str("user").str("alice").get()));
  EXPECT_EQ(p.status, StartupStatus::kBad);
  EXPECT_NE(p.error.find("terminator"), std::string::npos) << p.error;
  // Only the version: no terminator at all.
  EXPECT_EQ(parse(packet(Bytes().u32(kProtocolV3).get())).status, StartupStatus::kBad);
}

TEST(Startup, UnterminatedStringRejected) {
  EXPECT_EQ(parse(packet(Bytes().u32(kProtocolV3).raw("user").get())).status, StartupStatus::kBad);
  EXPECT_EQ(parse(packet(Bytes().u32(kProtocolV3).str("user").raw("alice").get())).status,
            StartupStatus::kBad);
}

TEST(Startup, OddKeyValueCountRejected) {
  // "user", "alice", "database" and then the terminator: the last name has no value.
  const Parsed p =
      parse(packet(Bytes().u32(kProtocolV3).str("user").str("alice").str("database").u8(0).get()));
  EXPECT_EQ(p.status, StartupStatus::kBad);
  const Parsed q = parse(packet(Bytes().u32(kProtocolV3).str("user").get()));
  EXPECT_EQ(q.status, StartupStatus::kBad);
}

TEST(Startup, TrailingBytesAfterTerminatorRejected) {
  const Parsed p =
      parse(packet(Bytes().u32(kProtocolV3).str("user").str("u").u8(0).raw("xyz").get()));
  EXPECT_EQ(p.status, StartupStatus::kBad);
}

TEST(Startup, SpecialRequestsWithWrongLengthRejected) {
  EXPECT_EQ(parse(packet(Bytes().u32(kSslRequestCode).u32(0).get())).status, StartupStatus::kBad);
  EXPECT_EQ(parse(packet(Bytes().u32(kGssEncRequestCode).u8(0).get())).status, StartupStatus::kBad);
  EXPECT_EQ(parse(packet(Bytes().u32(kCancelRequestCode).i32(1).get())).status,
            StartupStatus::kBad);
  EXPECT_EQ(parse(packet(Bytes().u32(kCancelRequestCode).i32(1).i32(2).i32(3).get())).status,
            StartupStatus::kBad);
}

}  // namespace
}  // namespace pgwarden::protocol
