// Encoders: each appends one whole message to a caller's buffer, writing the length last, so a
// session can batch several messages into one write without intermediate allocations.
// Layouts: https://www.postgresql.org/docs/15/protocol-message-formats.html
#include <span>

#include "protocol/message_types.h"
#include "protocol/messages.h"
#include "protocol/wire.h"

namespace pgwarden::protocol {

using namespace wire;

namespace {

// ErrorResponse / NoticeResponse: (Byte1 code, String value)..., then a zero byte.
void writeFields(std::string& out, char type, const Field* fields, size_t count) {
  const size_t at = beginMessage(out, type);
  for (const Field& f : std::span(fields, count)) {
    if (f.code == '\0') continue;  // would end the list early
    putU8(out, uint8_t(f.code));
    putCString(out, f.value);
  }
  putU8(out, 0);
  endMessage(out, at);
}

void writeSimple(std::string& out, char type, std::string_view severity, std::string_view sqlstate,
                 std::string_view message, std::string_view detail, std::string_view hint) {
  Field fields[6] = {{'S', severity}, {'V', severity}, {'C', sqlstate}, {'M', message}};
  size_t n = 4;
  if (!detail.empty()) fields[n++] = {'D', detail};
  if (!hint.empty()) fields[n++] = {'H', hint};
  writeFields(out, type, fields, n);
}

void writeEmpty(std::string& out, char type) {
  putU8(out, uint8_t(type));
  putU32(out, 4);
}

// Authentication* 'R': Int32 length, Int32 code, payload.
size_t beginAuth(std::string& out, int32_t code) {
  const size_t at = beginMessage(out, be::kAuthentication);
  putI32(out, code);
  return at;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Backend -> client
// ---------------------------------------------------------------------------------------------

void writeErrorResponse(std::string& out, const std::vector<Field>& fields) {
  writeFields(out, be::kErrorResponse, fields.data(), fields.size());
}
void writeNoticeResponse(std::string& out, const std::vector<Field>& fields) {
  writeFields(out, be::kNoticeResponse, fields.data(), fields.size());
}
void writeError(std::string& out, std::string_view severity, std::string_view sqlstate,
                std::string_view message, std::string_view detail, std::string_view hint) {
  writeSimple(out, be::kErrorResponse, severity, sqlstate, message, detail, hint);
}
void writeNotice(std::string& out, std::string_view severity, std::string_view sqlstate,
                 std::string_view message, std::string_view detail, std::string_view hint) {
  writeSimple(out, be::kNoticeResponse, severity, sqlstate, message, detail, hint);
}

void writeAuthOk(std::string& out) { endMessage(out, beginAuth(out, 0)); }
void writeAuthCleartext(std::string& out) { endMessage(out, beginAuth(out, 3)); }
void writeAuthMd5(std::string& out, const uint8_t salt[4]) {
  const size_t at = beginAuth(out, 5);
  out.append(reinterpret_cast<const char*>(salt), 4);
  endMessage(out, at);
}
void writeAuthSasl(std::string& out, const std::vector<std::string_view>& mechanisms) {
  const size_t at = beginAuth(out, 10);
  for (std::string_view m : mechanisms) {
    if (!m.empty()) putCString(out, m);  // an empty name would end the list
  }
  putU8(out, 0);
  endMessage(out, at);
}
void writeAuthSaslContinue(std::string& out, std::string_view data) {
  const size_t at = beginAuth(out, 11);
  out.append(data);
  endMessage(out, at);
}
void writeAuthSaslFinal(std::string& out, std::string_view data) {
  const size_t at = beginAuth(out, 12);
  out.append(data);
  endMessage(out, at);
}

void writeParameterStatus(std::string& out, std::string_view name, std::string_view value) {
  const size_t at = beginMessage(out, be::kParameterStatus);
  putCString(out, name);
  putCString(out, value);
  endMessage(out, at);
}
void writeBackendKeyData(std::string& out, int32_t pid, int32_t key) {
  const size_t at = beginMessage(out, be::kBackendKeyData);
  putI32(out, pid);
  putI32(out, key);
  endMessage(out, at);
}
void writeReadyForQuery(std::string& out, char status) {
  const size_t at = beginMessage(out, be::kReadyForQuery);
  putU8(out, uint8_t(status));
  endMessage(out, at);
}
void writeCommandComplete(std::string& out, std::string_view tag) {
  const size_t at = beginMessage(out, be::kCommandComplete);
  putCString(out, tag);
  endMessage(out, at);
}
void writeEmptyQueryResponse(std::string& out) { writeEmpty(out, be::kEmptyQueryResponse); }
void writeParseComplete(std::string& out) { writeEmpty(out, be::kParseComplete); }
void writeBindComplete(std::string& out) { writeEmpty(out, be::kBindComplete); }
void writeCloseComplete(std::string& out) { writeEmpty(out, be::kCloseComplete); }
void writeNoData(std::string& out) { writeEmpty(out, be::kNoData); }
void writePortalSuspended(std::string& out) { writeEmpty(out, be::kPortalSuspended); }

// ParameterDescription 't': Int16 n, n x Int32 type OID.
void writeParameterDescription(std::string& out, const std::vector<uint32_t>& types) {
  const size_t at = beginMessage(out, be::kParameterDescription);
  putU16(out, uint16_t(types.size()));
  for (uint32_t t : types) putU32(out, t);
  endMessage(out, at);
}

// NegotiateProtocolVersion 'v': Int32 newest version, Int32 n, n x String option name.
void writeNegotiateProtocolVersion(std::string& out, uint32_t newest_minor,
                                   const std::vector<std::string>& unrecognized) {
  const size_t at = beginMessage(out, be::kNegotiateProtocolVersion);
  putU32(out, newest_minor > 0xffff ? newest_minor : (kProtocolV3 | newest_minor));
  putU32(out, uint32_t(unrecognized.size()));
  for (const auto& name : unrecognized) putCString(out, name);
  endMessage(out, at);
}

// RowDescription 'T': Int16 n, then per column String name, Int32 table OID, Int16 column
// number, Int32 type OID, Int16 type size, Int32 type modifier, Int16 format (0 = text).
void writeRowDescription(std::string& out, const std::vector<ColumnDesc>& columns) {
  const size_t at = beginMessage(out, be::kRowDescription);
  putI16(out, int16_t(columns.size()));
  for (const ColumnDesc& c : columns) {
    putCString(out, c.name);
    putU32(out, 0);
    putI16(out, 0);
    putU32(out, c.type_oid);
    putI16(out, c.type_len);
    putI32(out, c.type_mod);
    putI16(out, 0);
  }
  endMessage(out, at);
}

// DataRow 'D': Int16 n, then per value Int32 length (-1 = NULL) and the bytes.
void writeDataRow(std::string& out, const std::vector<std::optional<std::string_view>>& values) {
  const size_t at = beginMessage(out, be::kDataRow);
  putI16(out, int16_t(values.size()));
  for (const auto& v : values) {
    if (!v) {
      putI32(out, -1);
      continue;
    }
    putI32(out, int32_t(v->size()));
    out.append(*v);
  }
  endMessage(out, at);
}

// ---------------------------------------------------------------------------------------------
// Frontend -> server
// ---------------------------------------------------------------------------------------------

// StartupMessage: Int32 length, Int32 version 3.0, (String name, String value)..., zero byte.
void writeStartup(std::string& out,
                  const std::vector<std::pair<std::string, std::string>>& params) {
  const size_t at = beginPacket(out);
  putU32(out, kProtocolV3);
  for (const auto& [name, value] : params) {
    if (name.empty()) continue;  // an empty name is the list terminator
    putCString(out, name);
    putCString(out, value);
  }
  putU8(out, 0);
  endMessage(out, at);
}
void writeSslRequest(std::string& out) {
  putU32(out, 8);
  putU32(out, kSslRequestCode);
}
void writeGssEncRequest(std::string& out) {
  putU32(out, 8);
  putU32(out, kGssEncRequestCode);
}
void writeCancelRequest(std::string& out, int32_t pid, int32_t key) {
  putU32(out, 16);
  putU32(out, kCancelRequestCode);
  putI32(out, pid);
  putI32(out, key);
}

void writeQuery(std::string& out, std::string_view sql) {
  const size_t at = beginMessage(out, fe::kQuery);
  putCString(out, sql);
  endMessage(out, at);
}
void writeParse(std::string& out, std::string_view statement, std::string_view sql,
                const std::vector<uint32_t>& param_types) {
  const size_t at = beginMessage(out, fe::kParse);
  putCString(out, statement);
  putCString(out, sql);
  putU16(out, uint16_t(param_types.size()));
  for (uint32_t t : param_types) putU32(out, t);
  endMessage(out, at);
}
void writeBind(std::string& out, const BindMsg& bind) {
  const size_t at = beginMessage(out, fe::kBind);
  putCString(out, bind.portal);
  putCString(out, bind.statement);
  putU16(out, uint16_t(bind.param_formats.size()));
  for (int16_t f : bind.param_formats) putI16(out, f);
  putU16(out, uint16_t(bind.params.size()));
  for (const auto& p : bind.params) {
    if (!p) {
      putI32(out, -1);
      continue;
    }
    putI32(out, int32_t(p->size()));
    out.append(*p);
  }
  putU16(out, uint16_t(bind.result_formats.size()));
  for (int16_t f : bind.result_formats) putI16(out, f);
  endMessage(out, at);
}
void writeDescribe(std::string& out, char kind, std::string_view name) {
  const size_t at = beginMessage(out, fe::kDescribe);
  putU8(out, uint8_t(kind));
  putCString(out, name);
  endMessage(out, at);
}
void writeExecute(std::string& out, std::string_view portal, int32_t max_rows) {
  const size_t at = beginMessage(out, fe::kExecute);
  putCString(out, portal);
  putI32(out, max_rows);
  endMessage(out, at);
}
void writeClose(std::string& out, char kind, std::string_view name) {
  const size_t at = beginMessage(out, fe::kClose);
  putU8(out, uint8_t(kind));
  putCString(out, name);
  endMessage(out, at);
}
void writeSync(std::string& out) { writeEmpty(out, fe::kSync); }
void writeFlush(std::string& out) { writeEmpty(out, fe::kFlush); }
void writeTerminate(std::string& out) { writeEmpty(out, fe::kTerminate); }
void writePassword(std::string& out, std::string_view password) {
  const size_t at = beginMessage(out, fe::kPassword);
  putCString(out, password);
  endMessage(out, at);
}
// SASLInitialResponse 'p': String mechanism, Int32 length, Byte[length].
void writeSaslInitial(std::string& out, std::string_view mechanism, std::string_view data) {
  const size_t at = beginMessage(out, fe::kPassword);
  putCString(out, mechanism);
  putI32(out, int32_t(data.size()));
  out.append(data);
  endMessage(out, at);
}
void writeSaslResponse(std::string& out, std::string_view data) {
  const size_t at = beginMessage(out, fe::kPassword);
  out.append(data);
  endMessage(out, at);
}

void writeCopyData(std::string& out, std::string_view data) {
  const size_t at = beginMessage(out, fe::kCopyData);
  out.append(data);
  endMessage(out, at);
}
void writeCopyDone(std::string& out) { writeEmpty(out, fe::kCopyDone); }
void writeCopyFail(std::string& out, std::string_view message) {
  const size_t at = beginMessage(out, fe::kCopyFail);
  putCString(out, message);
  endMessage(out, at);
}

}  // namespace pgwarden::protocol
