// Text that a client (or a server, or any peer) chose, made safe for one log line: control
// characters, invalid UTF-8 and line/bidi separators escaped, backslashes doubled, length capped.
// Every value a peer controls goes through logsafe() on its way into spdlog, so a user name with
// a newline cannot write a forged log line and a NUL byte cannot turn the log into "binary".
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace pgwarden {

// Default cap on the escaped form of one value (user names, paths, SQL excerpts...).
inline constexpr size_t kLogTextMaxBytes = 256;
// Cap for a whole message that embeds client text (a refusal, a disconnect reason).
inline constexpr size_t kLogMessageMaxBytes = 1024;

enum class LogEscape {
  // Everything a reader could misread: controls, invalid UTF-8, separators, and '\' as "\\",
  // so the escaped text maps back to exactly one input.
  kFull,
  // The log sink's last line of defence for a whole message: controls, invalid UTF-8 and
  // separators only; backslashes stay as they are (call sites already escaped theirs).
  kControlsOnly,
};

// Appends `text` to `out` escaped: "\n", "\r", "\t", other bytes below 0x20 and 0x7f as "\xNN";
// bytes that are not part of valid UTF-8 as "\xNN"; C1 controls, U+2028/U+2029 and the bidi
// controls as "\u{XXXX}"; '\' as "\\" (kFull only). Valid UTF-8 otherwise passes unchanged.
// When the escaped form would exceed `max_bytes`, it is cut at a character boundary and
// "...(N bytes)" follows, N being the size of the whole input; max_bytes 0 means no cap.
void appendLogText(std::string& out, std::string_view text, size_t max_bytes = kLogTextMaxBytes,
                   LogEscape mode = LogEscape::kFull);
std::string escapeLogText(std::string_view text, size_t max_bytes = kLogTextMaxBytes,
                          LogEscape mode = LogEscape::kFull);
// True when appendLogText(kControlsOnly, no cap) would change `text`: the sink's quick check.
bool needsLogEscape(std::string_view text);

// A value to be escaped when it is formatted: spdlog::warn("user={}", logsafe(user_)).
// It refers to the caller's text, so use it only within the logging call.
struct LogSafe {
  std::string_view text;
  size_t max_bytes;
};
inline LogSafe logsafe(std::string_view text, size_t max_bytes = kLogTextMaxBytes) {
  return {text, max_bytes};
}
// One byte, such as a message type: held by value so a temporary is safe.
struct LogSafeByte {
  char byte;
};
inline LogSafeByte logsafe(char byte) { return {byte}; }

}  // namespace pgwarden

template <>
struct fmt::formatter<pgwarden::LogSafe> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const pgwarden::LogSafe& v, FormatContext& ctx) const -> decltype(ctx.out()) {
    const std::string s = pgwarden::escapeLogText(v.text, v.max_bytes);
    return fmt::formatter<std::string_view>::format(s, ctx);
  }
};

template <>
struct fmt::formatter<pgwarden::LogSafeByte> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const pgwarden::LogSafeByte& v, FormatContext& ctx) const -> decltype(ctx.out()) {
    const std::string s = pgwarden::escapeLogText(std::string_view(&v.byte, 1));
    return fmt::formatter<std::string_view>::format(s, ctx);
  }
};
