// history: CRC-32C. The published check values (RFC 3720's and the "123456789" check), the CPU's
// instruction and the table agree at every length and alignment, and the CRC chains.
#include "history/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace pgwarden::history {
namespace {

TEST(Crc32c, GivesThePublishedValues) {
  EXPECT_EQ(crc32c(0, "", 0), 0u);
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), ascending(32);
  std::iota(ascending.begin(), ascending.end(), 0);
  EXPECT_EQ(crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(0, ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(0, ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32cPortable(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32c, TheInstructionAndTheTableAgreeAndTheCrcChains) {
  std::vector<uint8_t> data(300);
  uint32_t x = 12345;
  for (auto& b : data) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 16);
  }
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; offset + n <= 100; ++n) {
      const uint8_t* p = data.data() + offset;
      const uint32_t whole = crc32c(0, p, n);
      ASSERT_EQ(whole, crc32cPortable(0, p, n)) << offset << " " << n;
      for (size_t cut = 0; cut <= n; cut += 7) {
        ASSERT_EQ(crc32c(crc32c(0, p, cut), p + cut, n - cut), whole) << offset << " " << n << " " << cut;
      }
    }
  }
}

}  // namespace
}  // namespace pgwarden::history
