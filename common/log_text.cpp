// The one escaper for log lines (see log_text.h). It walks the text as UTF-8, one character at a
// time, so a cut never splits a character and each invalid byte is shown on its own.
#include "common/log_text.h"

#include <cstdint>

namespace pgwarden {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Length of the valid UTF-8 sequence at the front of `s` and its code point, or 0 when the
// first byte does not start one (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF).
size_t utf8Sequence(std::string_view s, uint32_t& cp) {
  const auto b = [&s](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = b(0);
  size_t len = 0;
  uint8_t lo = 0x80;
  uint8_t hi = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    len = 2;
    cp = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    len = 3;
    cp = lead & 0x0f;
    if (lead == 0xe0) lo = 0xa0;  // overlong below U+0800
    if (lead == 0xed) hi = 0x9f;  // UTF-16 surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    len = 4;
    cp = lead & 0x07;
    if (lead == 0xf0) lo = 0x90;  // overlong below U+10000
    if (lead == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    const uint8_t c = b(i);
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xbf;
    if (c < min || c > max) return 0;
    cp = (cp << 6) | (c & 0x3f);
  }
  return len;
}

// Characters that are valid but would mislead a reader of the log: C1 controls, the line and
// paragraph separators some viewers break lines at, and the bidi controls that reorder text.
bool misleadingCodePoint(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void appendHexByte(std::string& out, uint8_t c) {
  out += "\\x";
  out.push_back(kHex[c >> 4]);
  out.push_back(kHex[c & 0xf]);
}

// The escaped form of the character at the front of `s` into `piece`; returns the bytes used.
size_t escapeOne(std::string_view s, LogEscape mode, std::string& piece) {
  piece.clear();
  const auto c = static_cast<uint8_t>(s[0]);
  if (c < 0x80) {
    switch (c) {
      case '\n':
        piece = "\\n";
        break;
      case '\r':
        piece = "\\r";
        break;
      case '\t':
        piece = "\\t";
        break;
      case '\\':
        piece = mode == LogEscape::kFull ? "\\\\" : "\\";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          appendHexByte(piece, c);
        } else {
          piece.push_back(static_cast<char>(c));
        }
    }
    return 1;
  }
  uint32_t cp = 0;
  const size_t len = utf8Sequence(s, cp);
  if (len == 0) {
    appendHexByte(piece, c);
    return 1;
  }
  if (misleadingCodePoint(cp)) {
    piece = "\\u{";
    for (int shift = cp > 0xff ? 12 : 4; shift >= 0; shift -= 4) {
      piece.push_back(kHex[(cp >> shift) & 0xf]);
    }
    piece.push_back('}');
  } else {
    piece.assign(s.substr(0, len));
  }
  return len;
}

}  // namespace

void appendLogText(std::string& out, std::string_view text, size_t max_bytes, LogEscape mode) {
  std::string piece;
  size_t used = 0;  // escaped bytes of this value so far
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = escapeOne(text.substr(pos), mode, piece);
    if (max_bytes != 0 && used + piece.size() > max_bytes) {
      out += "...(";
      out += std::to_string(text.size());
      out += " bytes)";
      return;
    }
    out += piece;
    used += piece.size();
    pos += n;
  }
}

std::string escapeLogText(std::string_view text, size_t max_bytes, LogEscape mode) {
  std::string out;
  out.reserve(text.size() < max_bytes || max_bytes == 0 ? text.size() : max_bytes + 24);
  appendLogText(out, text, max_bytes, mode);
  return out;
}

bool needsLogEscape(std::string_view text) {
  std::string piece;
  for (size_t pos = 0; pos < text.size();) {
    const auto c = static_cast<uint8_t>(text[pos]);
    if (c >= 0x20 && c < 0x7f) {  // the common case, without building a piece
      ++pos;
      continue;
    }
    const size_t n = escapeOne(text.substr(pos), LogEscape::kControlsOnly, piece);
    if (piece != text.substr(pos, n)) return true;
    pos += n;
  }
  return false;
}

}  // namespace pgwarden
