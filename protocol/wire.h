// Bounds-checked big-endian reading and writing of PostgreSQL wire fields, shared by the
// decoders and encoders of this module. Internal to protocol/: other modules use messages.h.
// Every read checks what is left first, so a decoder built on Reader cannot read out of bounds.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pgwarden::protocol::wire {

// A cursor over one message body. Each getter returns false (and consumes nothing) when the
// field does not fit in what is left.
class Reader {
 public:
  explicit Reader(std::string_view body) : p_(body.data()), end_(body.data() + body.size()) {}

  size_t remaining() const { return size_t(end_ - p_); }
  bool atEnd() const { return p_ == end_; }

  // A NUL-terminated string; `out` excludes the terminator, which is consumed.
  bool cstring(std::string_view& out) {
    if (atEnd()) return false;  // also keeps a null data() away from memchr
    const void* nul = std::memchr(p_, '\0', remaining());
    if (nul == nullptr) return false;
    const char* z = static_cast<const char*>(nul);
    out = std::string_view(p_, size_t(z - p_));
    p_ = z + 1;
    return true;
  }
  bool u8(uint8_t& out) {
    if (remaining() < 1) return false;
    out = uint8_t(*p_++);
    return true;
  }
  bool u16(uint16_t& out) {
    if (remaining() < 2) return false;
    out = uint16_t((uint16_t(uint8_t(p_[0])) << 8) | uint16_t(uint8_t(p_[1])));
    p_ += 2;
    return true;
  }
  bool i16(int16_t& out) {
    uint16_t v = 0;
    if (!u16(v)) return false;
    out = int16_t(v);
    return true;
  }
  bool u32(uint32_t& out) {
    if (remaining() < 4) return false;
    out = (uint32_t(uint8_t(p_[0])) << 24) | (uint32_t(uint8_t(p_[1])) << 16) |
          (uint32_t(uint8_t(p_[2])) << 8) | uint32_t(uint8_t(p_[3]));
    p_ += 4;
    return true;
  }
  bool i32(int32_t& out) {
    uint32_t v = 0;
    if (!u32(v)) return false;
    out = int32_t(v);
    return true;
  }
  bool bytes(size_t n, std::string_view& out) {
    if (remaining() < n) return false;
    out = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  bool skip(size_t n) {
    if (remaining() < n) return false;
    p_ += n;
    return true;
  }
  std::string_view rest() {
    std::string_view r(p_, remaining());
    p_ = end_;
    return r;
  }

 private:
  const char* p_;
  const char* end_;
};

inline void putU8(std::string& out, uint8_t v) { out.push_back(char(v)); }
inline void putU16(std::string& out, uint16_t v) {
  const char b[2] = {char(v >> 8), char(v)};
  out.append(b, 2);
}
inline void putU32(std::string& out, uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  out.append(b, 4);
}
inline void putI16(std::string& out, int16_t v) { putU16(out, uint16_t(v)); }
inline void putI32(std::string& out, int32_t v) { putU32(out, uint32_t(v)); }
inline void patchU32(std::string& out, size_t at, uint32_t v) {
  out[at] = char(v >> 24);
  out[at + 1] = char(v >> 16);
  out[at + 2] = char(v >> 8);
  out[at + 3] = char(v);
}

// Writes a String field. A NUL inside `s` would end the field early and shift every later field,
// so the value is cut at its first NUL: the message stays well formed whatever the caller passes.
inline void putCString(std::string& out, std::string_view s) {
  if (!s.empty()) {
    if (const void* nul = std::memchr(s.data(), '\0', s.size()); nul != nullptr) {
      s = s.substr(0, size_t(static_cast<const char*>(nul) - s.data()));
    }
  }
  out.append(s.data(), s.size());
  out.push_back('\0');
}

// Typed message: type byte, then a length patched in by endMessage().
inline size_t beginMessage(std::string& out, char type) {
  out.push_back(type);
  const size_t at = out.size();
  out.append(4, '\0');
  return at;
}
// Untyped (startup-phase) packet: the length comes first.
inline size_t beginPacket(std::string& out) {
  const size_t at = out.size();
  out.append(4, '\0');
  return at;
}
inline void endMessage(std::string& out, size_t length_at) {
  patchU32(out, length_at, uint32_t(out.size() - length_at));
}

}  // namespace pgwarden::protocol::wire
