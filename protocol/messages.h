// PostgreSQL v3 message codec: frame splitting, validated message views, and encoders.
// It only turns bytes into messages and back; it decides nothing (no policy, no state).
// Layouts: https://www.postgresql.org/docs/15/protocol-message-formats.html
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "protocol/message_types.h"

namespace pgwarden::protocol {

// ---------------------------------------------------------------------------------------------
// Framing
// ---------------------------------------------------------------------------------------------

// One complete typed message in a buffer. `raw` is the whole message (type byte, length, body)
// so a proxy can forward it unchanged; `body` is what follows the 4-byte length.
struct Frame {
  char type = 0;
  std::string_view raw;
  std::string_view body;
};

enum class FrameStatus {
  kNeedMore,   // not a whole message yet
  kFrame,      // `out` holds one message; call consume(out.raw.size()) when done with it
  kTooLarge,   // length field above the cap for this message type
  kBadLength,  // length field below 4
};

// Per-type caps on message length (bytes, including the length field).
struct FrameLimits {
  uint32_t max_message = 1u << 20;      // Query, Parse and everything not listed below
  uint32_t max_bind = 64u << 20;        // Bind, CopyData, FunctionCall
  uint32_t max_backend = 1u << 30;      // any message from the server (DataRow can be large)
};

// The cap that applies to a message of `type`: the one its entry in the frontend or backend
// table names (message_types.h): max_backend for anything from the server; max_bind for the
// client's Bind, CopyData and FunctionCall; max_message else.
uint32_t frameCap(char type, const FrameLimits& limits, bool from_backend);

// Accumulates bytes from a stream and hands out whole messages. Peeks at the header first and
// rejects an oversized length before buffering the body. Owns its bytes; views handed out stay
// valid until the next append()/consume().
//
// On the hot path: consumed bytes are only skipped (an offset moves); the unread tail is moved
// to the front lazily, when the offset passes half the buffer or an append would otherwise grow
// it, so each byte is moved a bounded number of times. Capacity is kept between messages and
// released when the buffer drains after holding an unusually large message.
class FrameBuffer {
 public:
  void append(const char* data, size_t len);
  // `from_backend` selects FrameLimits::max_backend; otherwise the per-type client caps apply.
  FrameStatus next(Frame& out, const FrameLimits& limits, bool from_backend) const;
  // Drops `n` bytes from the front (clamped to size()).
  void consume(size_t n);
  size_t size() const { return buf_.size() - off_; }
  const char* data() const { return buf_.data() + off_; }
  void clear() { buf_.clear(); off_ = 0; }
  // Gives the storage back when nothing is buffered (an idle connection's), so the memory an
  // idle session holds does not depend on the largest message it once read.
  void release() {
    if (size() == 0) {
      std::string().swap(buf_);
      off_ = 0;
    }
  }
  // Bytes held including consumed-but-not-yet-compacted ones and spare capacity (for metrics).
  size_t capacity() const { return buf_.capacity(); }

  // Capacity above this is given back once the buffer drains.
  static constexpr size_t kKeepCapacity = 1u << 20;

 private:
  std::string buf_;
  size_t off_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Startup phase (untyped packets): StartupMessage, SSLRequest, GSSENCRequest, CancelRequest
// ---------------------------------------------------------------------------------------------

inline constexpr uint32_t kProtocolV3 = 196608;       // 3.0
inline constexpr uint32_t kSslRequestCode = 80877103;
inline constexpr uint32_t kGssEncRequestCode = 80877104;
inline constexpr uint32_t kCancelRequestCode = 80877102;
inline constexpr uint32_t kMaxStartupPacket = 10000;  // as PostgreSQL's MAX_STARTUP_PACKET_LENGTH

inline constexpr uint16_t protocolMajor(uint32_t version) { return uint16_t(version >> 16); }
inline constexpr uint16_t protocolMinor(uint32_t version) { return uint16_t(version & 0xffff); }

enum class StartupKind { kStartup, kSslRequest, kGssEncRequest, kCancel };

struct StartupPacket {
  StartupKind kind = StartupKind::kStartup;
  uint32_t version = 0;                                      // kStartup: requested version
  std::vector<std::pair<std::string, std::string>> params;  // kStartup, in order sent
  int32_t cancel_pid = 0;                                    // kCancel
  int32_t cancel_key = 0;                                    // kCancel
};

enum class StartupStatus { kNeedMore, kPacket, kBad };
// Reads one untyped startup-phase packet from the front of `data`. On kPacket sets `used` to the
// bytes consumed; on kBad sets `error`. Validates the length (8..kMaxStartupPacket), the
// terminators and the pairs; a major version other than 3 is kBad; a newer minor is kept in
// `version` for the caller to answer with NegotiateProtocolVersion.
StartupStatus parseStartup(std::string_view data, StartupPacket& out, size_t& used,
                           std::string& error);

// ---------------------------------------------------------------------------------------------
// Frontend message views (client -> server). Parse functions validate the whole body.
// ---------------------------------------------------------------------------------------------

struct QueryMsg { std::string_view sql; };                             // 'Q'
struct ParseMsg {                                                       // 'P'
  std::string_view statement;
  std::string_view sql;
  std::vector<uint32_t> param_types;
};
struct BindMsg {                                                        // 'B'
  std::string_view portal;
  std::string_view statement;
  std::vector<int16_t> param_formats;
  std::vector<std::optional<std::string_view>> params;  // nullopt = SQL NULL
  std::vector<int16_t> result_formats;
};
struct DescribeMsg { char kind = 'S'; std::string_view name; };       // 'D' ('S' or 'P')
struct ExecuteMsg { std::string_view portal; int32_t max_rows = 0; }; // 'E'
struct CloseMsg { char kind = 'S'; std::string_view name; };          // 'C' ('S' or 'P')
struct PasswordMsg { std::string_view password; };                     // 'p' (cleartext/md5)
struct SaslInitialMsg { std::string_view mechanism; std::string_view data; };  // 'p' first
struct SaslResponseMsg { std::string_view data; };                     // 'p' later

Result<QueryMsg> parseQuery(std::string_view body);
Result<ParseMsg> parseParse(std::string_view body);
Result<BindMsg> parseBind(std::string_view body);
// The same into `out`, whose lists keep their storage from one call to the next (a caller that
// reuses one BindMsg decodes Binds without allocating). On failure `out` holds no valid message.
[[nodiscard]] Status parseBindInto(std::string_view body, BindMsg& out);
Result<DescribeMsg> parseDescribe(std::string_view body);
Result<ExecuteMsg> parseExecute(std::string_view body);
Result<CloseMsg> parseClose(std::string_view body);
Result<PasswordMsg> parsePassword(std::string_view body);
Result<SaslInitialMsg> parseSaslInitial(std::string_view body);
Result<SaslResponseMsg> parseSaslResponse(std::string_view body);

// ---------------------------------------------------------------------------------------------
// Backend message views (server -> client)
// ---------------------------------------------------------------------------------------------

// ErrorResponse 'E' / NoticeResponse 'N' fields, by their one-letter codes.
struct ErrorFields {
  std::vector<std::pair<char, std::string>> fields;
  std::string_view get(char code) const;  // "" when absent
  std::string_view severity() const { return get('V').empty() ? get('S') : get('V'); }
  std::string_view sqlstate() const { return get('C'); }
  std::string_view message() const { return get('M'); }
};

struct AuthRequest {                       // 'R'
  int32_t code = 0;                        // 0 ok, 3 cleartext, 5 md5, 10 SASL, 11 cont, 12 final
  std::string_view data;                   // md5 salt (4 bytes), SASL payload, or mechanism list
  std::vector<std::string_view> mechanisms;  // code 10
};
struct ParameterStatusMsg { std::string_view name; std::string_view value; };  // 'S'
struct BackendKeyDataMsg { int32_t pid = 0; int32_t key = 0; };                 // 'K'
struct ReadyForQueryMsg { char status = 'I'; };                                 // 'Z' I/T/E
struct CommandCompleteMsg { std::string_view tag; };                            // 'C'
struct RowDescriptionMsg { int16_t columns = 0; };                              // 'T' (count)
struct DataRowMsg { int16_t columns = 0; };                                     // 'D' (count)

Result<ErrorFields> parseErrorFields(std::string_view body);
Result<AuthRequest> parseAuthRequest(std::string_view body);
Result<ParameterStatusMsg> parseParameterStatus(std::string_view body);
Result<BackendKeyDataMsg> parseBackendKeyData(std::string_view body);
Result<ReadyForQueryMsg> parseReadyForQuery(std::string_view body);
Result<CommandCompleteMsg> parseCommandComplete(std::string_view body);
// The row count a CommandComplete tag ends with ("UPDATE 3" -> 3, "INSERT 0 5" -> 5); 0 if none.
int64_t commandTagCount(std::string_view tag);
Result<RowDescriptionMsg> parseRowDescription(std::string_view body);
Result<DataRowMsg> parseDataRow(std::string_view body);
// The same, and the row's first value in `first` (nullopt for NULL; left as it was for a row of
// no columns): one cell looked at without building the row's list.
Result<DataRowMsg> parseDataRowFirst(std::string_view body, std::optional<std::string_view>* first);
// Full column descriptions of a RowDescription, for code that reads results itself.
struct RowField {
  std::string_view name;
  uint32_t table_oid = 0;
  int16_t column = 0;
  uint32_t type_oid = 0;
  int16_t type_len = 0;
  int32_t type_mod = 0;
  int16_t format = 0;
};
Result<std::vector<RowField>> parseRowDescriptionFields(std::string_view body);
// CopyInResponse 'G', CopyOutResponse 'H', CopyBothResponse 'W' share one layout.
struct CopyResponseMsg {
  int8_t format = 0;                   // 0 text, 1 binary
  std::vector<int16_t> column_formats;
};
Result<CopyResponseMsg> parseCopyResponse(std::string_view body);
// Cells of a DataRow, for code that reads results itself (catalog refresh, EXPLAIN, console).
Result<std::vector<std::optional<std::string_view>>> parseDataRowValues(std::string_view body);

// ---------------------------------------------------------------------------------------------
// Encoders: each appends one whole message to `out` (no allocation when `out` has capacity).
// ---------------------------------------------------------------------------------------------

// Backend -> client
struct Field { char code; std::string_view value; };
void writeErrorResponse(std::string& out, const std::vector<Field>& fields);   // 'E'
void writeNoticeResponse(std::string& out, const std::vector<Field>& fields);  // 'N'
// Convenience: severity (S and V), SQLSTATE, message, optional detail and hint.
void writeError(std::string& out, std::string_view severity, std::string_view sqlstate,
                std::string_view message, std::string_view detail = {},
                std::string_view hint = {});
void writeNotice(std::string& out, std::string_view severity, std::string_view sqlstate,
                 std::string_view message, std::string_view detail = {},
                 std::string_view hint = {});
void writeAuthOk(std::string& out);
void writeAuthCleartext(std::string& out);
void writeAuthMd5(std::string& out, const uint8_t salt[4]);
void writeAuthSasl(std::string& out, const std::vector<std::string_view>& mechanisms);
void writeAuthSaslContinue(std::string& out, std::string_view data);
void writeAuthSaslFinal(std::string& out, std::string_view data);
void writeParameterStatus(std::string& out, std::string_view name, std::string_view value);
void writeBackendKeyData(std::string& out, int32_t pid, int32_t key);
void writeReadyForQuery(std::string& out, char status);
void writeCommandComplete(std::string& out, std::string_view tag);
void writeEmptyQueryResponse(std::string& out);
void writeParseComplete(std::string& out);
void writeBindComplete(std::string& out);
void writeCloseComplete(std::string& out);
void writeNoData(std::string& out);
void writePortalSuspended(std::string& out);
void writeParameterDescription(std::string& out, const std::vector<uint32_t>& types);
// `newest_minor` is the newest 3.x minor we speak (0 today). On the wire the field carries the
// whole version number, as PostgreSQL sends it (PG_PROTOCOL_LATEST) and libpq reads it; a value
// above 0xffff is taken as an already whole version and sent unchanged.
void writeNegotiateProtocolVersion(std::string& out, uint32_t newest_minor,
                                   const std::vector<std::string>& unrecognized);
struct ColumnDesc {
  std::string_view name;
  uint32_t type_oid = 25;   // text
  int16_t type_len = -1;
  int32_t type_mod = -1;
};
void writeRowDescription(std::string& out, const std::vector<ColumnDesc>& columns);
void writeDataRow(std::string& out, const std::vector<std::optional<std::string_view>>& values);

// Frontend -> server
void writeStartup(std::string& out,
                  const std::vector<std::pair<std::string, std::string>>& params);
void writeSslRequest(std::string& out);
void writeCancelRequest(std::string& out, int32_t pid, int32_t key);
void writeQuery(std::string& out, std::string_view sql);
void writeParse(std::string& out, std::string_view statement, std::string_view sql,
                const std::vector<uint32_t>& param_types);
void writeBind(std::string& out, const BindMsg& bind);
void writeDescribe(std::string& out, char kind, std::string_view name);
void writeExecute(std::string& out, std::string_view portal, int32_t max_rows);
void writeClose(std::string& out, char kind, std::string_view name);
void writeSync(std::string& out);
void writeFlush(std::string& out);
void writeTerminate(std::string& out);
void writePassword(std::string& out, std::string_view password);   // 'p', NUL-terminated
void writeSaslInitial(std::string& out, std::string_view mechanism, std::string_view data);
void writeSaslResponse(std::string& out, std::string_view data);
void writeGssEncRequest(std::string& out);
// COPY sub-protocol, both directions: CopyData 'd', CopyDone 'c', CopyFail 'f' (frontend only;
// how a proxy refuses COPY FROM STDIN after the server's CopyInResponse).
void writeCopyData(std::string& out, std::string_view data);
void writeCopyDone(std::string& out);
void writeCopyFail(std::string& out, std::string_view message);

// String fields are NUL-terminated on the wire: every encoder cuts a value at its first NUL so a
// message always stays well formed.

// Big-endian helpers for code that patches messages in place.
inline uint32_t readU32(const char* p) {
  return (uint32_t(uint8_t(p[0])) << 24) | (uint32_t(uint8_t(p[1])) << 16) |
         (uint32_t(uint8_t(p[2])) << 8) | uint32_t(uint8_t(p[3]));
}

}  // namespace pgwarden::protocol
