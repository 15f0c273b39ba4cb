// Malformed bodies are rejected by every decoder with a reason: missing terminators, counts that
// exceed the body, negative lengths, truncated fields and trailing garbage. Bodies are exact-size
// heap copies so a read past the end would be caught by the sanitizer build.
#include <string>

#include "protocol/messages.h"
#include "test_util.h"

namespace pgwarden::protocol {
namespace {

using test::Bytes;
using test::ExactBytes;

template <typename Parse>
void expectRejected(Parse parse, const std::string& body, const char* what) {
  ExactBytes copy(body);
  auto r = parse(copy.view());
  ASSERT_FALSE(r) << what << ": accepted";
  EXPECT_EQ(r.error().rfind("invalid ", 0), 0u) << what << ": " << r.error();
}

template <typename Parse>
void expectAccepted(Parse parse, const std::string& body, const char* what) {
  ExactBytes copy(body);
  auto r = parse(copy.view());
  EXPECT_TRUE(r) << what << ": " << (r ? "" : r.error());
}

TEST(Malformed, Query) {
  expectRejected(parseQuery, "", "empty body");
  expectRejected(parseQuery, "select 1", "no terminator");
  expectRejected(parseQuery, Bytes().str("select 1").raw("x").get(), "trailing garbage");
  expectRejected(parseQuery, Bytes().str("select 1").str("select 2").get(), "two strings");
}

TEST(Malformed, Parse) {
  expectRejected(parseParse, "S_1", "statement unterminated");
  expectRejected(parseParse, Bytes().str("S_1").raw("select 1").get(), "query unterminated");
  expectRejected(parseParse, Bytes().str("").str("select 1").get(), "count missing");
  expectRejected(parseParse, Bytes().str("").str("select 1").u8(0).get(), "count truncated");
  expectRejected(parseParse, Bytes().str("").str("select $1").u16(3).u32(23).u32(25).get(),
                 "count exceeds body");
  expectRejected(parseParse, Bytes().str("").str("select $1").u16(1).u32(23).u8(0).get(),
                 "trailing garbage");
  expectRejected(parseParse,
                 Bytes().str("").str("select $1").u16(1).raw(std::string_view("\0\0", 2)).get(),
                 "oid truncated");
  expectRejected(parseParse, Bytes().str("").str("q").u16(0xffff).get(), "huge count, no oids");
}

// A valid Bind body from its parts, so each case below breaks exactly one thing.
std::string bindBody(const std::string& params_part, const std::string& tail = "") {
  return Bytes().str("p").str("s").u16(1).i16(0).raw(params_part).raw(tail).get();
}

TEST(Malformed, Bind) {
  const std::string results = Bytes().u16(1).i16(0).get();
  expectAccepted(parseBind, bindBody(Bytes().u16(1).i32(2).raw("42").get(), results), "valid");
  expectAccepted(parseBind, bindBody(Bytes().u16(1).i32(-1).get(), results), "NULL param");
  expectRejected(parseBind, "p", "portal unterminated");
  expectRejected(parseBind, Bytes().str("p").raw("s").get(), "statement unterminated");
  expectRejected(parseBind, Bytes().str("p").str("s").get(), "format count missing");
  expectRejected(parseBind, Bytes().str("p").str("s").u16(3).i16(0).get(),
                 "format count exceeds body");
  expectRejected(parseBind, bindBody(""), "param count missing");
  expectRejected(parseBind, bindBody(Bytes().u16(2).i32(2).raw("42").get(), results),
                 "param count exceeds body");
  expectRejected(parseBind, bindBody(Bytes().u16(1).i32(-2).get(), results), "negative length -2");
  expectRejected(parseBind, bindBody(Bytes().u16(1).i32(INT32_MIN).get(), results),
                 "negative length INT32_MIN");
  expectRejected(parseBind, bindBody(Bytes().u16(1).i32(100).raw("short").get(), results),
                 "length exceeds body");
  expectRejected(parseBind, bindBody(Bytes().u16(1).i32(0x7fffffff).get(), results), "huge length");
  expectRejected(parseBind, bindBody(Bytes().u16(1).raw(std::string_view("\0\0", 2)).get()),
                 "param length truncated");
  expectRejected(parseBind, bindBody(Bytes().u16(1).i32(-1).get()), "result count missing");
  expectRejected(parseBind, bindBody(Bytes().u16(1).i32(-1).get(), Bytes().u16(2).i16(0).get()),
                 "result count exceeds body");
  expectRejected(parseBind, bindBody(Bytes().u16(1).i32(-1).get(), results + "z"),
                 "trailing garbage");
}

template <typename Parse>
void describeLikeCases(Parse parse) {
  expectRejected(parse, "", "empty");
  expectRejected(parse, "S", "name missing");
  expectRejected(parse, "Sname", "name unterminated");
  expectRejected(parse, Bytes().u8('X').str("n").get(), "bad kind");
  expectRejected(parse, Bytes().u8(0).str("n").get(), "NUL kind");
  expectRejected(parse, Bytes().u8('S').str("n").raw("x").get(), "trailing garbage");
  expectAccepted(parse, Bytes().u8('P').str("").get(), "unnamed portal");
}

TEST(Malformed, Describe) { describeLikeCases(parseDescribe); }
TEST(Malformed, Close) { describeLikeCases(parseClose); }

TEST(Malformed, Execute) {
  expectRejected(parseExecute, "", "empty");
  expectRejected(parseExecute, "portal", "unterminated");
  expectRejected(parseExecute, Bytes().str("").get(), "row limit missing");
  expectRejected(parseExecute, Bytes().str("").u16(1).get(), "row limit truncated");
  expectRejected(parseExecute, Bytes().str("").i32(0).u8(0).get(), "trailing garbage");
}

TEST(Malformed, Password) {
  expectRejected(parsePassword, "", "empty");
  expectRejected(parsePassword, "secret", "unterminated");
  expectRejected(parsePassword, Bytes().str("secret").raw("x").get(), "trailing garbage");
}

TEST(Malformed, SaslInitial) {
  expectRejected(parseSaslInitial, "SCRAM-SHA-256", "mechanism unterminated");
  expectRejected(parseSaslInitial, Bytes().str("SCRAM-SHA-256").get(), "length missing");
  expectRejected(parseSaslInitial, Bytes().str("SCRAM-SHA-256").u16(0).get(), "length truncated");
  expectRejected(parseSaslInitial, Bytes().str("SCRAM-SHA-256").i32(-2).get(), "negative length");
  expectRejected(parseSaslInitial, Bytes().str("SCRAM-SHA-256").i32(20).raw("n,,").get(),
                 "length exceeds body");
  expectRejected(parseSaslInitial, Bytes().str("SCRAM-SHA-256").i32(3).raw("n,,x").get(),
                 "trailing garbage");
  expectRejected(parseSaslInitial, Bytes().str("SCRAM-SHA-256").i32(-1).raw("x").get(),
                 "data after -1");
}

TEST(Malformed, ErrorFields) {
  expectRejected(parseErrorFields, "", "empty");
  expectRejected(parseErrorFields, Bytes().u8('S').str("ERROR").get(), "list unterminated");
  expectRejected(parseErrorFields, Bytes().u8('S').raw("ERROR").get(), "value unterminated");
  expectRejected(parseErrorFields, Bytes().u8('S').get(), "value missing");
  expectRejected(parseErrorFields, Bytes().u8('S').str("ERROR").u8(0).raw("x").get(),
                 "trailing garbage");
  expectAccepted(parseErrorFields, Bytes().u8(0).get(), "no fields");
}

TEST(Malformed, AuthRequest) {
  expectRejected(parseAuthRequest, "", "empty");
  expectRejected(parseAuthRequest, std::string("\0\0\0", 3), "code truncated");
  expectRejected(parseAuthRequest, Bytes().i32(0).u8(0).get(), "AuthenticationOk with payload");
  expectRejected(parseAuthRequest, Bytes().i32(3).u8(0).get(), "cleartext with payload");
  expectRejected(parseAuthRequest, Bytes().i32(5).raw("abc").get(), "md5 salt of 3 bytes");
  expectRejected(parseAuthRequest, Bytes().i32(5).raw("abcde").get(), "md5 salt of 5 bytes");
  expectRejected(parseAuthRequest, Bytes().i32(10).str("SCRAM-SHA-256").get(),
                 "SASL list unterminated");
  expectRejected(parseAuthRequest, Bytes().i32(10).raw("SCRAM-SHA-256").get(),
                 "SASL name unterminated");
  expectRejected(parseAuthRequest, Bytes().i32(10).str("SCRAM-SHA-256").u8(0).raw("x").get(),
                 "SASL trailing garbage");
  expectRejected(parseAuthRequest, Bytes().i32(10).get(), "SASL with nothing");
  expectAccepted(parseAuthRequest, Bytes().i32(11).get(), "SASLContinue with empty data");
}

TEST(Malformed, ParameterStatus) {
  expectRejected(parseParameterStatus, "", "empty");
  expectRejected(parseParameterStatus, Bytes().str("TimeZone").get(), "value missing");
  expectRejected(parseParameterStatus, Bytes().str("TimeZone").raw("UTC").get(),
                 "value unterminated");
  expectRejected(parseParameterStatus, Bytes().str("TimeZone").str("UTC").u8(0).get(),
                 "trailing garbage");
}

TEST(Malformed, BackendKeyData) {
  expectRejected(parseBackendKeyData, "", "empty");
  expectRejected(parseBackendKeyData, std::string(7, '\1'), "7 bytes");
  expectRejected(parseBackendKeyData, std::string(9, '\1'), "9 bytes");
}

TEST(Malformed, ReadyForQuery) {
  expectRejected(parseReadyForQuery, "", "empty");
  expectRejected(parseReadyForQuery, "II", "two bytes");
  expectRejected(parseReadyForQuery, "X", "unknown status");
  expectRejected(parseReadyForQuery, std::string(1, '\0'), "NUL status");
}

TEST(Malformed, CommandComplete) {
  expectRejected(parseCommandComplete, "", "empty");
  expectRejected(parseCommandComplete, "SELECT 1", "unterminated");
  expectRejected(parseCommandComplete, Bytes().str("SELECT 1").u8(1).get(), "trailing garbage");
}

std::string field(const char* name) {
  return Bytes().str(name).u32(0).i16(0).u32(25).i16(-1).i32(-1).i16(0).get();
}

template <typename Parse>
void rowDescriptionCases(Parse parse) {
  expectAccepted(parse, Bytes().i16(1).raw(field("a")).get(), "valid");
  expectRejected(parse, "", "empty");
  expectRejected(parse, "\1", "count truncated");
  expectRejected(parse, Bytes().i16(-1).get(), "negative count");
  expectRejected(parse, Bytes().i16(2).raw(field("a")).get(), "count exceeds body");
  expectRejected(parse, Bytes().i16(1).raw(field("a").substr(0, 10)).get(), "field truncated");
  expectRejected(parse, Bytes().i16(1).raw("abcdefghijklmnopqrstuvwxyz").get(),
                 "name unterminated");
  expectRejected(parse, Bytes().i16(1).raw(field("a")).u8(0).get(), "trailing garbage");
}

TEST(Malformed, RowDescription) {
  rowDescriptionCases(parseRowDescription);
  rowDescriptionCases(parseRowDescriptionFields);
}

template <typename Parse>
void dataRowCases(Parse parse) {
  expectAccepted(parse, Bytes().i16(2).i32(1).raw("x").i32(-1).get(), "valid");
  expectRejected(parse, "", "empty");
  expectRejected(parse, Bytes().i16(-1).get(), "negative count");
  expectRejected(parse, Bytes().i16(3).i32(-1).i32(-1).get(), "count exceeds body");
  expectRejected(parse, Bytes().i16(1).i32(-2).get(), "negative length -2");
  expectRejected(parse, Bytes().i16(1).i32(INT32_MIN).get(), "negative length INT32_MIN");
  expectRejected(parse, Bytes().i16(1).i32(5).raw("abc").get(), "length exceeds body");
  expectRejected(parse, Bytes().i16(1).i32(0x7fffffff).raw("abc").get(), "huge length");
  expectRejected(parse, Bytes().i16(1).u16(0).get(), "length truncated");
  expectRejected(parse, Bytes().i16(1).i32(1).raw("xy").get(), "trailing garbage");
  expectRejected(parse, Bytes().i16(0).u8(0).get(), "garbage after zero columns");
}

TEST(Malformed, DataRow) {
  dataRowCases(parseDataRow);
  dataRowCases(parseDataRowValues);
}

TEST(Malformed, CopyResponse) {
  expectRejected(parseCopyResponse, "", "empty");
  expectRejected(parseCopyResponse, Bytes().u8(0).get(), "count missing");
  expectRejected(parseCopyResponse, Bytes().u8(0).i16(2).i16(0).get(), "count exceeds body");
  expectRejected(parseCopyResponse, Bytes().u8(0).i16(0).u8(0).get(), "trailing garbage");
}

}  // namespace
}  // namespace pgwarden::protocol
