// Validating decoders for message bodies, both directions. Each one checks every length, count and
// terminator against what is left in the body and rejects trailing bytes, so a view it returns
// always lies inside the body it was given. Structure only: values (format codes, names) are left
// to PostgreSQL, which answers them with an ordinary error the client can recover from.
// Layouts: https://www.postgresql.org/docs/15/protocol-message-formats.html
#include <cstdint>
#include <string>

#include "protocol/messages.h"
#include "protocol/wire.h"

namespace pgwarden::protocol {

namespace {

using wire::Reader;

Error bad(const char* message, const char* what) {
  return Error{std::string("invalid ") + message + " message: " + what};
}

// Reads the "Int16 count, then count x Int16" arrays of Bind and the Copy*Response messages.
bool readInt16Array(Reader& r, std::vector<int16_t>& out) {
  uint16_t n = 0;
  if (!r.u16(n) || r.remaining() < size_t(n) * 2) return false;
  out.resize(n);
  for (auto& v : out) (void)r.i16(v);
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Frontend
// ---------------------------------------------------------------------------------------------

// Query 'Q': String query.
Result<QueryMsg> parseQuery(std::string_view body) {
  Reader r(body);
  QueryMsg m;
  if (!r.cstring(m.sql)) return bad("Query", "query string is not terminated");
  if (!r.atEnd()) return bad("Query", "unexpected bytes after the query string");
  return m;
}

// Parse 'P': String statement, String query, Int16 n, n x Int32 parameter type OID.
Result<ParseMsg> parseParse(std::string_view body) {
  Reader r(body);
  ParseMsg m;
  if (!r.cstring(m.statement)) return bad("Parse", "statement name is not terminated");
  if (!r.cstring(m.sql)) return bad("Parse", "query string is not terminated");
  // The count is unsigned on the wire in practice: libpq allows up to 65535 parameters.
  uint16_t n = 0;
  if (!r.u16(n)) return bad("Parse", "parameter type count is missing");
  if (r.remaining() != size_t(n) * 4) {
    return bad("Parse", "parameter type count does not match the message length");
  }
  m.param_types.resize(n);
  for (auto& t : m.param_types) (void)r.u32(t);
  return m;
}

// Bind 'B': String portal, String statement, Int16 n + n x Int16 parameter format codes,
// Int16 n + n x (Int32 length (-1 = NULL), Byte[length]), Int16 n + n x Int16 result formats.
Status parseBindInto(std::string_view body, BindMsg& m) {
  Reader r(body);
  if (!r.cstring(m.portal)) return bad("Bind", "portal name is not terminated");
  if (!r.cstring(m.statement)) return bad("Bind", "statement name is not terminated");
  if (!readInt16Array(r, m.param_formats)) {
    return bad("Bind", "parameter format count exceeds the message length");
  }
  uint16_t n = 0;
  if (!r.u16(n)) return bad("Bind", "parameter count is missing");
  if (r.remaining() < size_t(n) * 4) {
    return bad("Bind", "parameter count exceeds the message length");
  }
  m.params.clear();
  m.params.reserve(n);
  for (uint16_t i = 0; i < n; ++i) {
    int32_t len = 0;
    if (!r.i32(len)) return bad("Bind", "parameter length is missing");
    if (len == -1) {
      m.params.emplace_back(std::nullopt);
      continue;
    }
    if (len < 0) return bad("Bind", "negative parameter length");
    std::string_view value;
    if (!r.bytes(size_t(len), value)) {
      return bad("Bind", "parameter length exceeds the message length");
    }
    m.params.emplace_back(value);
  }
  if (!readInt16Array(r, m.result_formats)) {
    return bad("Bind", "result format count is missing or exceeds the message length");
  }
  if (!r.atEnd()) return bad("Bind", "unexpected bytes after the result formats");
  return {};
}

Result<BindMsg> parseBind(std::string_view body) {
  BindMsg m;
  if (auto st = parseBindInto(body, m); !st) return Error{st.error()};
  return m;
}

namespace {

// Describe 'D' and Close 'C' share Byte1 kind ('S' statement / 'P' portal), String name.
template <typename Msg>
Result<Msg> parseKindAndName(std::string_view body, const char* what) {
  Reader r(body);
  Msg m;
  uint8_t kind = 0;
  if (!r.u8(kind)) return bad(what, "kind byte is missing");
  if (kind != 'S' && kind != 'P') return bad(what, "kind must be 'S' or 'P'");
  m.kind = char(kind);
  if (!r.cstring(m.name)) return bad(what, "name is not terminated");
  if (!r.atEnd()) return bad(what, "unexpected bytes after the name");
  return m;
}

}  // namespace

Result<DescribeMsg> parseDescribe(std::string_view body) {
  return parseKindAndName<DescribeMsg>(body, "Describe");
}

Result<CloseMsg> parseClose(std::string_view body) {
  return parseKindAndName<CloseMsg>(body, "Close");
}

// Execute 'E': String portal, Int32 row limit (0 or negative = no limit).
Result<ExecuteMsg> parseExecute(std::string_view body) {
  Reader r(body);
  ExecuteMsg m;
  if (!r.cstring(m.portal)) return bad("Execute", "portal name is not terminated");
  if (!r.i32(m.max_rows)) return bad("Execute", "row limit is missing");
  if (!r.atEnd()) return bad("Execute", "unexpected bytes after the row limit");
  return m;
}

// PasswordMessage 'p': String password (cleartext, or "md5" + 32 hex digits).
Result<PasswordMsg> parsePassword(std::string_view body) {
  Reader r(body);
  PasswordMsg m;
  if (!r.cstring(m.password)) return bad("password", "password is not terminated");
  if (!r.atEnd()) return bad("password", "unexpected bytes after the password");
  return m;
}

// SASLInitialResponse 'p': String mechanism, Int32 length (-1 = none), Byte[length].
Result<SaslInitialMsg> parseSaslInitial(std::string_view body) {
  Reader r(body);
  SaslInitialMsg m;
  if (!r.cstring(m.mechanism)) return bad("SASLInitialResponse", "mechanism is not terminated");
  int32_t len = 0;
  if (!r.i32(len)) return bad("SASLInitialResponse", "data length is missing");
  if (len < -1) return bad("SASLInitialResponse", "negative data length");
  if (len >= 0 && !r.bytes(size_t(len), m.data)) {
    return bad("SASLInitialResponse", "data length exceeds the message length");
  }
  if (!r.atEnd()) return bad("SASLInitialResponse", "unexpected bytes after the data");
  return m;
}

// SASLResponse 'p': Byte[n], the whole body.
Result<SaslResponseMsg> parseSaslResponse(std::string_view body) { return SaslResponseMsg{body}; }

// ---------------------------------------------------------------------------------------------
// Backend
// ---------------------------------------------------------------------------------------------

std::string_view ErrorFields::get(char code) const {
  for (const auto& [c, v] : fields) {
    if (c == code) return v;
  }
  return {};
}

// ErrorResponse 'E' / NoticeResponse 'N': repeated (Byte1 code, String value), then a zero byte.
Result<ErrorFields> parseErrorFields(std::string_view body) {
  Reader r(body);
  ErrorFields m;
  for (;;) {
    uint8_t code = 0;
    if (!r.u8(code)) return bad("ErrorResponse", "field list is not terminated");
    if (code == 0) break;
    std::string_view value;
    if (!r.cstring(value)) return bad("ErrorResponse", "field value is not terminated");
    m.fields.emplace_back(char(code), std::string(value));
  }
  if (!r.atEnd()) return bad("ErrorResponse", "unexpected bytes after the field list");
  return m;
}

// Authentication* 'R': Int32 code, then a code-specific payload.
Result<AuthRequest> parseAuthRequest(std::string_view body) {
  Reader r(body);
  AuthRequest m;
  if (!r.i32(m.code)) return bad("authentication request", "code is missing");
  switch (m.code) {
    case 0:  // AuthenticationOk
    case 3:  // AuthenticationCleartextPassword
      if (!r.atEnd()) return bad("authentication request", "unexpected payload");
      return m;
    case 5:  // AuthenticationMD5Password: Byte4 salt
      if (!r.bytes(4, m.data) || !r.atEnd()) {
        return bad("authentication request", "md5 salt must be 4 bytes");
      }
      return m;
    case 10: {  // AuthenticationSASL: String mechanism, ..., then a zero byte
      const std::string_view list = body.substr(4);
      for (;;) {
        std::string_view mech;
        if (!r.cstring(mech)) {
          return bad("authentication request", "SASL mechanism list is not terminated");
        }
        if (mech.empty()) break;
        m.mechanisms.push_back(mech);
      }
      if (!r.atEnd()) {
        return bad("authentication request", "unexpected bytes after the mechanism list");
      }
      m.data = list;
      return m;
    }
    default:  // 11 SASLContinue, 12 SASLFinal, GSS/SSPI: the rest is opaque data
      m.data = r.rest();
      return m;
  }
}

// ParameterStatus 'S': String name, String value.
Result<ParameterStatusMsg> parseParameterStatus(std::string_view body) {
  Reader r(body);
  ParameterStatusMsg m;
  if (!r.cstring(m.name)) return bad("ParameterStatus", "name is not terminated");
  if (!r.cstring(m.value)) return bad("ParameterStatus", "value is not terminated");
  if (!r.atEnd()) return bad("ParameterStatus", "unexpected bytes after the value");
  return m;
}

// BackendKeyData 'K': Int32 process ID, Int32 secret key (protocol 3.0).
Result<BackendKeyDataMsg> parseBackendKeyData(std::string_view body) {
  if (body.size() != 8) return bad("BackendKeyData", "body must be 8 bytes");
  Reader r(body);
  BackendKeyDataMsg m;
  (void)r.i32(m.pid);
  (void)r.i32(m.key);
  return m;
}

// ReadyForQuery 'Z': Byte1 transaction status 'I', 'T' or 'E'.
Result<ReadyForQueryMsg> parseReadyForQuery(std::string_view body) {
  if (body.size() != 1) return bad("ReadyForQuery", "body must be 1 byte");
  const char s = body[0];
  if (s != 'I' && s != 'T' && s != 'E') {
    return bad("ReadyForQuery", "transaction status must be 'I', 'T' or 'E'");
  }
  return ReadyForQueryMsg{s};
}

// CommandComplete 'C': String tag.
int64_t commandTagCount(std::string_view tag) {
  const auto sp = tag.rfind(' ');
  if (sp == std::string_view::npos) return 0;
  int64_t n = 0;
  for (size_t i = sp + 1; i < tag.size(); ++i) {
    if (tag[i] < '0' || tag[i] > '9' || n > (INT64_MAX - 9) / 10) return 0;
    n = n * 10 + (tag[i] - '0');
  }
  return n;
}

Result<CommandCompleteMsg> parseCommandComplete(std::string_view body) {
  Reader r(body);
  CommandCompleteMsg m;
  if (!r.cstring(m.tag)) return bad("CommandComplete", "tag is not terminated");
  if (!r.atEnd()) return bad("CommandComplete", "unexpected bytes after the tag");
  return m;
}

// RowDescription 'T': Int16 n, then n x (String name, Int32 table OID, Int16 column number,
// Int32 type OID, Int16 type size, Int32 type modifier, Int16 format code).
Result<std::vector<RowField>> parseRowDescriptionFields(std::string_view body) {
  Reader r(body);
  int16_t n = 0;
  if (!r.i16(n)) return bad("RowDescription", "column count is missing");
  if (n < 0) return bad("RowDescription", "negative column count");
  constexpr size_t kMinField = 1 + 18;  // empty name + fixed part
  if (r.remaining() < size_t(n) * kMinField) {
    return bad("RowDescription", "column count exceeds the message length");
  }
  std::vector<RowField> fields(static_cast<size_t>(n));
  for (auto& f : fields) {
    if (!r.cstring(f.name)) return bad("RowDescription", "column name is not terminated");
    if (!r.u32(f.table_oid) || !r.i16(f.column) || !r.u32(f.type_oid) || !r.i16(f.type_len) ||
        !r.i32(f.type_mod) || !r.i16(f.format)) {
      return bad("RowDescription", "column description is truncated");
    }
  }
  if (!r.atEnd()) return bad("RowDescription", "unexpected bytes after the columns");
  return fields;
}

Result<RowDescriptionMsg> parseRowDescription(std::string_view body) {
  auto fields = parseRowDescriptionFields(body);
  if (!fields) return Error{fields.error()};
  return RowDescriptionMsg{int16_t(fields->size())};
}

namespace {

// DataRow 'D': Int16 n, then n x (Int32 length (-1 = NULL), Byte[length]). `onValue` gets each
// value in order (nullopt for NULL) as it is validated; what it keeps is the caller's choice, so
// a caller that wants only the count or one cell allocates nothing.
template <typename OnValue>
Result<int16_t> walkDataRow(std::string_view body, OnValue&& onValue) {
  Reader r(body);
  int16_t n = 0;
  if (!r.i16(n)) return bad("DataRow", "column count is missing");
  if (n < 0) return bad("DataRow", "negative column count");
  if (r.remaining() < size_t(n) * 4) {
    return bad("DataRow", "column count exceeds the message length");
  }
  for (int16_t i = 0; i < n; ++i) {
    int32_t len = 0;
    if (!r.i32(len)) return bad("DataRow", "value length is missing");
    if (len == -1) {
      onValue(std::optional<std::string_view>());
      continue;
    }
    if (len < 0) return bad("DataRow", "negative value length");
    std::string_view value;
    if (!r.bytes(size_t(len), value)) {
      return bad("DataRow", "value length exceeds the message length");
    }
    onValue(std::optional<std::string_view>(value));
  }
  if (!r.atEnd()) return bad("DataRow", "unexpected bytes after the values");
  return n;
}

}  // namespace

Result<DataRowMsg> parseDataRow(std::string_view body) {
  auto n = walkDataRow(body, [](std::optional<std::string_view>) {});
  if (!n) return Error{n.error()};
  return DataRowMsg{*n};
}

Result<DataRowMsg> parseDataRowFirst(std::string_view body, std::optional<std::string_view>* first) {
  bool seen = false;
  auto n = walkDataRow(body, [&](std::optional<std::string_view> v) {
    if (!seen) *first = v;
    seen = true;
  });
  if (!n) return Error{n.error()};
  return DataRowMsg{*n};
}

Result<std::vector<std::optional<std::string_view>>> parseDataRowValues(std::string_view body) {
  std::vector<std::optional<std::string_view>> values;
  Reader r(body);
  if (int16_t n = 0; r.i16(n) && n > 0 && r.remaining() >= size_t(n) * 4) values.reserve(size_t(n));
  auto n = walkDataRow(body, [&](std::optional<std::string_view> v) { values.push_back(v); });
  if (!n) return Error{n.error()};
  return values;
}

// CopyInResponse 'G' / CopyOutResponse 'H' / CopyBothResponse 'W': Int8 overall format,
// Int16 n, n x Int16 column format codes.
Result<CopyResponseMsg> parseCopyResponse(std::string_view body) {
  Reader r(body);
  CopyResponseMsg m;
  uint8_t format = 0;
  if (!r.u8(format)) return bad("copy response", "format is missing");
  m.format = int8_t(format);
  if (!readInt16Array(r, m.column_formats)) {
    return bad("copy response", "column count is missing or exceeds the message length");
  }
  if (!r.atEnd()) return bad("copy response", "unexpected bytes after the column formats");
  return m;
}

}  // namespace pgwarden::protocol
