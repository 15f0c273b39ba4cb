// Helpers shared by the protocol tests: exactly-sized heap copies of a body (so AddressSanitizer
// reports any read past the end), a byte-string builder for hand-made messages, and single-frame
// extraction through the real FrameBuffer.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "protocol/messages.h"

namespace pgwarden::protocol::test {

// A heap copy with no slack after the last byte: std::string's SSO buffer and spare capacity
// would hide an out-of-bounds read from the sanitizer.
class ExactBytes {
 public:
  explicit ExactBytes(std::string_view s) : size_(s.size()), p_(new char[s.size() ? s.size() : 1]) {
    if (!s.empty()) std::memcpy(p_.get(), s.data(), s.size());
  }
  std::string_view view() const { return std::string_view(p_.get(), size_); }
  // Whether `v` lies inside the copy (an empty view anywhere is fine).
  bool holds(std::string_view v) const {
    if (v.empty()) return true;
    return v.data() >= p_.get() && v.data() + v.size() <= p_.get() + size_;
  }

 private:
  size_t size_;
  std::unique_ptr<char[]> p_;
};

// Builds wire bytes by hand, independent of the encoders under test.
class Bytes {
 public:
  Bytes& u8(uint8_t v) {
    s_.push_back(char(v));
    return *this;
  }
  Bytes& i16(int16_t v) { return u16(uint16_t(v)); }
  Bytes& u16(uint16_t v) {
    s_.push_back(char(v >> 8));
    s_.push_back(char(v));
    return *this;
  }
  Bytes& i32(int32_t v) { return u32(uint32_t(v)); }
  Bytes& u32(uint32_t v) {
    for (int sh = 24; sh >= 0; sh -= 8) s_.push_back(char(v >> sh));
    return *this;
  }
  Bytes& str(std::string_view v) {
    s_.append(v);
    s_.push_back('\0');
    return *this;
  }  // String
  Bytes& raw(std::string_view v) {
    s_.append(v);
    return *this;
  }
  const std::string& get() const { return s_; }
  // Wraps the bytes so far as the body of a typed message.
  std::string message(char type) const {
    Bytes m;
    m.u8(uint8_t(type)).u32(uint32_t(s_.size() + 4)).raw(s_);
    return m.get();
  }

 private:
  std::string s_;
};

// Splits `wire` (which must hold exactly one message) with the real FrameBuffer.
inline std::string bodyOf(const std::string& wire, char expect_type, bool from_backend) {
  FrameBuffer fb;
  fb.append(wire.data(), wire.size());
  Frame f;
  FrameLimits limits;
  EXPECT_EQ(fb.next(f, limits, from_backend), FrameStatus::kFrame);
  EXPECT_EQ(f.type, expect_type);
  EXPECT_EQ(f.raw.size(), wire.size()) << "encoder wrote more than one message";
  return std::string(f.body);
}

}  // namespace pgwarden::protocol::test
