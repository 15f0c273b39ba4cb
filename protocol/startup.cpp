// Startup-phase packets, which carry no type byte: StartupMessage, SSLRequest, GSSENCRequest and
// CancelRequest, told apart by the code after the length. Validation follows PostgreSQL's
// ProcessStartupPacket: length bounds first, then the exact layout of the name/value pairs.
// https://www.postgresql.org/docs/15/protocol-message-formats.html
#include <string>

#include "protocol/messages.h"
#include "protocol/wire.h"

namespace pgwarden::protocol {

namespace {

StartupStatus bad(std::string& error, std::string message) {
  error = std::move(message);
  return StartupStatus::kBad;
}

}  // namespace

StartupStatus parseStartup(std::string_view data, StartupPacket& out, size_t& used,
                           std::string& error) {
  if (data.size() < 4) return StartupStatus::kNeedMore;
  const uint32_t len = readU32(data.data());
  // The length is judged before waiting for the rest, so a huge claimed length costs nothing.
  if (len < 8 || len > kMaxStartupPacket) {
    return bad(error, "invalid length of startup packet: " + std::to_string(len));
  }
  if (data.size() < len) return StartupStatus::kNeedMore;

  wire::Reader r(data.substr(4, len - 4));
  uint32_t code = 0;
  (void)r.u32(code);  // len >= 8 guarantees it is there

  out = StartupPacket{};
  switch (code) {
    case kSslRequestCode:
    case kGssEncRequestCode:
      // SSLRequest / GSSENCRequest: Int32 length (8), Int32 code.
      if (len != 8) return bad(error, "invalid length of encryption request packet");
      out.kind = code == kSslRequestCode ? StartupKind::kSslRequest : StartupKind::kGssEncRequest;
      used = len;
      return StartupStatus::kPacket;
    case kCancelRequestCode:
      // CancelRequest: Int32 length (16), Int32 code, Int32 process ID, Int32 secret key.
      if (len != 16) return bad(error, "invalid length of cancel request packet");
      out.kind = StartupKind::kCancel;
      (void)r.i32(out.cancel_pid);
      (void)r.i32(out.cancel_key);
      used = len;
      return StartupStatus::kPacket;
    default:
      break;
  }

  if (protocolMajor(code) != 3) {
    return bad(error, "unsupported frontend protocol " + std::to_string(protocolMajor(code)) + "." +
                          std::to_string(protocolMinor(code)) + ": server supports 3.0 to 3.0");
  }
  out.kind = StartupKind::kStartup;
  out.version = code;

  // StartupMessage: pairs of String name, String value, then a single terminating NUL which
  // must be the packet's last byte.
  for (;;) {
    std::string_view name;
    if (!r.cstring(name)) {
      return bad(error, "invalid startup packet layout: expected terminator as last byte");
    }
    if (name.empty()) break;  // the final terminator
    std::string_view value;
    if (!r.cstring(value)) {
      // The name is not echoed: it is arbitrary client bytes and may end up in a log line.
      return bad(error, "invalid startup packet layout: a parameter name has no value");
    }
    out.params.emplace_back(std::string(name), std::string(value));
  }
  if (!r.atEnd()) {
    return bad(error, "invalid startup packet layout: expected terminator as last byte");
  }
  used = len;
  return StartupStatus::kPacket;
}

}  // namespace pgwarden::protocol
