// Write-transaction handles: a handle verifies where it was made; with the fleet's shared key
// another instance verifies it too (and names its holder), while one signed with another key, or
// altered, is invalid there; without a shared key another instance's handle is routed unverified.
#include "mcp/txn_handle.h"

#include <gtest/gtest.h>

namespace pgwarden::mcp {
namespace {

using Kind = HandleCheck::Kind;

const std::string kFleetKey(32, 'k');

HandleKey key(std::string instance, std::string_view shared = {}) {
  HandleKey k;
  EXPECT_TRUE(makeHandleKey(std::move(instance), shared, &k));
  return k;
}

std::string altered(std::string handle) {
  handle.back() = handle.back() == '0' ? '1' : '0';
  return handle;
}

TEST(TxnHandle, VerifiesWhereItWasMadeAndNamesTheHolder) {
  const HandleKey a = key("pgw-a");
  const std::string h = mintTxnHandle(a, "0123abcd");
  const HandleCheck c = checkTxnHandle(a, h);
  EXPECT_EQ(c.kind, Kind::kOurs);
  EXPECT_EQ(c.holder, "0123abcd");
  EXPECT_EQ(checkTxnHandle(a, altered(h)).kind, Kind::kInvalid);
  EXPECT_EQ(checkTxnHandle(a, "pgwt1.garbage").kind, Kind::kInvalid);
}

TEST(TxnHandle, TheFleetKeyVerifiesAnotherInstancesHandle) {
  const HandleKey a = key("pgw-a", kFleetKey);
  const HandleKey b = key("pgw-b", kFleetKey);
  EXPECT_TRUE(a.shared && b.shared);
  const std::string h = mintTxnHandle(a, "0123abcd");
  const HandleCheck c = checkTxnHandle(b, h);
  EXPECT_EQ(c.kind, Kind::kElsewhere);
  EXPECT_EQ(c.instance, "pgw-a");
  EXPECT_TRUE(c.verified);
  EXPECT_TRUE(c.holder.empty());  // b holds nothing of a's
  EXPECT_EQ(checkTxnHandle(b, altered(h)).kind, Kind::kInvalid);
  // The same instance after a restart (a new boot, the same file): rolled back, and verified.
  const HandleKey a2 = key("pgw-a", kFleetKey);
  const HandleCheck r = checkTxnHandle(a2, h);
  EXPECT_EQ(r.kind, Kind::kRestarted);
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(checkTxnHandle(a2, altered(h)).kind, Kind::kInvalid);
}

TEST(TxnHandle, AHandleSignedWithAnotherKeyIsInvalidInTheFleet) {
  const HandleKey b = key("pgw-b", kFleetKey);
  const HandleKey outsider = key("pgw-x", std::string(32, 'z'));
  const HandleKey unshared = key("pgw-y");
  EXPECT_EQ(checkTxnHandle(b, mintTxnHandle(outsider, "0123abcd")).kind, Kind::kInvalid);
  EXPECT_EQ(checkTxnHandle(b, mintTxnHandle(unshared, "0123abcd")).kind, Kind::kInvalid);
  // One claiming to be b's, from an earlier process, but signed with another key.
  HandleKey fake = outsider;
  fake.instance = "pgw-b";
  EXPECT_EQ(checkTxnHandle(b, mintTxnHandle(fake, "0123abcd")).kind, Kind::kInvalid);
}

TEST(TxnHandle, WithoutASharedKeyAnotherInstancesHandleIsRoutedUnverified) {
  const HandleKey a = key("pgw-a");
  const HandleKey b = key("pgw-b");
  EXPECT_FALSE(b.shared);
  const HandleCheck c = checkTxnHandle(b, mintTxnHandle(a, "0123abcd"));
  EXPECT_EQ(c.kind, Kind::kElsewhere);
  EXPECT_EQ(c.instance, "pgw-a");
  EXPECT_FALSE(c.verified);
}

}  // namespace
}  // namespace pgwarden::mcp
