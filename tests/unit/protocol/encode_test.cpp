// Encoder/decoder round trips for every message, and the exact wire bytes of the fixed-layout
// ones checked against layouts written out by hand from the protocol documentation.
#include <string>
#include <vector>

#include "protocol/messages.h"
#include "test_util.h"

namespace pgwarden::protocol {
namespace {

using test::bodyOf;
using test::Bytes;

// ------------------------------------------------------------------ frontend

TEST(Codec, Query) {
  std::string w;
  writeQuery(w, "select * from fct_shipments where ship_date > now() - interval '1 day'");
  EXPECT_EQ(w, Bytes()
                   .str("select * from fct_shipments where ship_date > now() - interval '1 day'")
                   .message('Q'));
  const std::string body = bodyOf(w, 'Q', false);
  auto m = parseQuery(body);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->sql, "select * from fct_shipments where ship_date > now() - interval '1 day'");
}

TEST(Codec, EmptyQuery) {
  std::string w;
  writeQuery(w, "");
  const std::string m_body = bodyOf(w, 'Q', false);
  auto m = parseQuery(m_body);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->sql, "");
}

TEST(Codec, Parse) {
  std::string w;
  writeParse(w, "S_7", "select $1, $2, $3", {23, 25, 0});
  EXPECT_EQ(w,
            Bytes().str("S_7").str("select $1, $2, $3").u16(3).u32(23).u32(25).u32(0).message('P'));
  const std::string body = bodyOf(w, 'P', false);
  auto m = parseParse(body);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->statement, "S_7");
  EXPECT_EQ(m->sql, "select $1, $2, $3");
  EXPECT_EQ(m->param_types, (std::vector<uint32_t>{23, 25, 0}));
}

TEST(Codec, ParseWithoutTypes) {
  std::string w;
  writeParse(w, "", "select 1", {});
  const std::string m_body = bodyOf(w, 'P', false);
  auto m = parseParse(m_body);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->statement, "");
  EXPECT_TRUE(m->param_types.empty());
}

TEST(Codec, Bind) {
  const std::string binary("\x00\x01\x02\xff", 4);
  BindMsg in;
  in.portal = "C_1";
  in.statement = "S_1";
  in.param_formats = {0, 1, 0};
  in.params = {std::string_view("42"), std::string_view(binary), std::nullopt};
  in.result_formats = {1};
  std::string w;
  writeBind(w, in);
  EXPECT_EQ(w, Bytes()
                   .str("C_1")
                   .str("S_1")
                   .u16(3)
                   .i16(0)
                   .i16(1)
                   .i16(0)
                   .u16(3)
                   .i32(2)
                   .raw("42")
                   .i32(4)
                   .raw(binary)
                   .i32(-1)
                   .u16(1)
                   .i16(1)
                   .message('B'));
  const std::string body = bodyOf(w, 'B', false);
  auto m = parseBind(body);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->portal, "C_1");
  EXPECT_EQ(m->statement, "S_1");
  EXPECT_EQ(m->param_formats, in.param_formats);
  EXPECT_EQ(m->params, in.params);
  EXPECT_EQ(m->result_formats, in.result_formats);
  EXPECT_FALSE(m->params[2].has_value());
  EXPECT_TRUE(m->params[1].has_value());
}

TEST(Codec, BindEmptyValueIsNotNull) {
  BindMsg in;
  in.params = {std::string_view(""), std::nullopt};
  std::string w;
  writeBind(w, in);
  const std::string m_body = bodyOf(w, 'B', false);
  auto m = parseBind(m_body);
  ASSERT_TRUE(m) << m.error();
  ASSERT_EQ(m->params.size(), 2u);
  ASSERT_TRUE(m->params[0].has_value());
  EXPECT_EQ(*m->params[0], "");
  EXPECT_FALSE(m->params[1].has_value());
}

TEST(Codec, BindWith65535Parameters) {
  // libpq allows up to 65535 parameters: the count is unsigned on the wire.
  BindMsg in;
  in.params.assign(65535, std::nullopt);
  in.params[65534] = std::string_view("last");
  std::string w;
  writeBind(w, in);
  const std::string m_body = bodyOf(w, 'B', false);
  auto m = parseBind(m_body);
  ASSERT_TRUE(m) << m.error();
  ASSERT_EQ(m->params.size(), 65535u);
  EXPECT_EQ(m->params[65534], std::optional<std::string_view>("last"));
}

TEST(Codec, BindIntoReusedStorageReplacesTheLastBind) {
  BindMsg wide;
  wide.param_formats = {0, 1, 0};
  wide.params = {std::string_view("1"), std::string_view("2"), std::string_view("3")};
  wide.result_formats = {1, 1};
  BindMsg narrow;
  narrow.portal = "p";
  narrow.params = {std::nullopt};
  std::string w1, w2;
  writeBind(w1, wide);
  writeBind(w2, narrow);
  const std::string wide_body = bodyOf(w1, 'B', false);
  const std::string narrow_body = bodyOf(w2, 'B', false);
  BindMsg m;
  ASSERT_TRUE(parseBindInto(wide_body, m));
  EXPECT_EQ(m.params, wide.params);
  const auto* storage = m.params.data();
  ASSERT_TRUE(parseBindInto(narrow_body, m));
  EXPECT_EQ(m.portal, "p");
  EXPECT_TRUE(m.param_formats.empty());
  EXPECT_EQ(m.params, narrow.params);
  EXPECT_TRUE(m.result_formats.empty());
  EXPECT_EQ(m.params.data(), storage);  // the list's storage was kept
  EXPECT_FALSE(parseBindInto("p", m));
}

TEST(Codec, DescribeAndClose) {
  for (char kind : {'S', 'P'}) {
    std::string w;
    writeDescribe(w, kind, "S_3");
    EXPECT_EQ(w, Bytes().u8(uint8_t(kind)).str("S_3").message('D'));
    const std::string d_body = bodyOf(w, 'D', false);
    auto d = parseDescribe(d_body);
    ASSERT_TRUE(d) << d.error();
    EXPECT_EQ(d->kind, kind);
    EXPECT_EQ(d->name, "S_3");

    w.clear();
    writeClose(w, kind, "");
    EXPECT_EQ(w, Bytes().u8(uint8_t(kind)).str("").message('C'));
    const std::string c_body = bodyOf(w, 'C', false);
    auto c = parseClose(c_body);
    ASSERT_TRUE(c) << c.error();
    EXPECT_EQ(c->kind, kind);
    EXPECT_EQ(c->name, "");
  }
}

TEST(Codec, Execute) {
  for (int32_t rows : {0, 1, 50, -1, 2147483647}) {
    std::string w;
    writeExecute(w, "C_9", rows);
    EXPECT_EQ(w, Bytes().str("C_9").i32(rows).message('E'));
    const std::string m_body = bodyOf(w, 'E', false);
    auto m = parseExecute(m_body);
    ASSERT_TRUE(m) << m.error();
    EXPECT_EQ(m->portal, "C_9");
    EXPECT_EQ(m->max_rows, rows);
  }
}

TEST(Codec, SyncFlushTerminate) {
  std::string w;
  writeSync(w);
  writeFlush(w);
  writeTerminate(w);
  writeCopyDone(w);
  EXPECT_EQ(w, Bytes().u8('S').u32(4).u8('H').u32(4).u8('X').u32(4).u8('c').u32(4).get());
}

TEST(Codec, Password) {
  std::string w;
  writePassword(w, "md5a3556571e93b0d20722ba62be61e8c2d");
  EXPECT_EQ(w, Bytes().str("md5a3556571e93b0d20722ba62be61e8c2d").message('p'));
  const std::string m_body = bodyOf(w, 'p', false);
  auto m = parsePassword(m_body);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->password, "md5a3556571e93b0d20722ba62be61e8c2d");
}

TEST(Codec, SaslInitialAndResponse) {
  std::string w;
  writeSaslInitial(w, "SCRAM-SHA-256", "n,,n=,r=abc");
  EXPECT_EQ(w, Bytes().str("SCRAM-SHA-256").i32(11).raw("n,,n=,r=abc").message('p'));
  const std::string m_body = bodyOf(w, 'p', false);
  auto m = parseSaslInitial(m_body);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->mechanism, "SCRAM-SHA-256");
  EXPECT_EQ(m->data, "n,,n=,r=abc");

  // Length -1: no initial response.
  auto none = parseSaslInitial(Bytes().str("SCRAM-SHA-256").i32(-1).get());
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->data.empty());

  w.clear();
  writeSaslResponse(w, "c=biws,r=abc,p=xyz");
  EXPECT_EQ(w, Bytes().raw("c=biws,r=abc,p=xyz").message('p'));
  const std::string r_body = bodyOf(w, 'p', false);
  auto r = parseSaslResponse(r_body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data, "c=biws,r=abc,p=xyz");
}

TEST(Codec, CopyDataAndFail) {
  std::string w;
  writeCopyData(w, std::string("a\tb\n\0c", 6));
  EXPECT_EQ(w, Bytes().raw(std::string("a\tb\n\0c", 6)).message('d'));
  w.clear();
  writeCopyFail(w, "COPY FROM is not allowed");
  EXPECT_EQ(w, Bytes().str("COPY FROM is not allowed").message('f'));
}

TEST(Codec, StringFieldsStopAtNul) {
  // A NUL inside a value must not shift the fields after it.
  std::string w;
  writeParse(w, std::string_view("a\0b", 3), "select 1", {});
  const std::string m_body = bodyOf(w, 'P', false);
  auto m = parseParse(m_body);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->statement, "a");
  EXPECT_EQ(m->sql, "select 1");
}

// ------------------------------------------------------------------ backend

TEST(Codec, ErrorResponse) {
  std::string w;
  writeError(w, "FATAL", "28P01", "password authentication failed for user \"alice\"");
  EXPECT_EQ(w, Bytes()
                   .u8('S')
                   .str("FATAL")
                   .u8('V')
                   .str("FATAL")
                   .u8('C')
                   .str("28P01")
                   .u8('M')
                   .str("password authentication failed for user \"alice\"")
                   .u8(0)
                   .message('E'));
  const std::string e_body = bodyOf(w, 'E', true);
  auto e = parseErrorFields(e_body);
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->severity(), "FATAL");
  EXPECT_EQ(e->sqlstate(), "28P01");
  EXPECT_EQ(e->message(), "password authentication failed for user \"alice\"");
  EXPECT_EQ(e->get('D'), "");
}

TEST(Codec, NoticeWithDetailAndHint) {
  std::string w;
  writeNotice(w, "WARNING", "01000", "budget almost used", "90% of rows", "narrow the range");
  const std::string e_body = bodyOf(w, 'N', true);
  auto e = parseErrorFields(e_body);
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->severity(), "WARNING");
  EXPECT_EQ(e->sqlstate(), "01000");
  EXPECT_EQ(e->message(), "budget almost used");
  EXPECT_EQ(e->get('D'), "90% of rows");
  EXPECT_EQ(e->get('H'), "narrow the range");
}

TEST(Codec, ErrorFieldsGeneric) {
  std::string w;
  writeErrorResponse(w, {{'S', "ERROR"}, {'C', "42P01"}, {'M', "nope"}, {'P', "15"}});
  const std::string e_body = bodyOf(w, 'E', true);
  auto e = parseErrorFields(e_body);
  ASSERT_TRUE(e) << e.error();
  ASSERT_EQ(e->fields.size(), 4u);
  EXPECT_EQ(e->severity(), "ERROR");  // no V: falls back to S
  EXPECT_EQ(e->get('P'), "15");
  w.clear();
  writeNoticeResponse(w, {});
  EXPECT_EQ(w, Bytes().u8(0).message('N'));
}

TEST(Codec, AuthRequests) {
  std::string w;
  writeAuthOk(w);
  EXPECT_EQ(w, Bytes().i32(0).message('R'));
  const std::string ok_body = bodyOf(w, 'R', true);
  auto ok = parseAuthRequest(ok_body);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->code, 0);

  w.clear();
  writeAuthCleartext(w);
  EXPECT_EQ(w, Bytes().i32(3).message('R'));
  EXPECT_EQ(parseAuthRequest(bodyOf(w, 'R', true))->code, 3);

  w.clear();
  const uint8_t salt[4] = {0xde, 0xad, 0xbe, 0xef};
  writeAuthMd5(w, salt);
  EXPECT_EQ(w, Bytes().i32(5).raw("\xde\xad\xbe\xef").message('R'));
  const std::string md5_body = bodyOf(w, 'R', true);
  auto md5 = parseAuthRequest(md5_body);
  ASSERT_TRUE(md5);
  EXPECT_EQ(md5->code, 5);
  EXPECT_EQ(md5->data, "\xde\xad\xbe\xef");

  w.clear();
  writeAuthSasl(w, {"SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"});
  EXPECT_EQ(w, Bytes().i32(10).str("SCRAM-SHA-256-PLUS").str("SCRAM-SHA-256").u8(0).message('R'));
  const std::string sasl_body = bodyOf(w, 'R', true);
  auto sasl = parseAuthRequest(sasl_body);
  ASSERT_TRUE(sasl) << sasl.error();
  EXPECT_EQ(sasl->code, 10);
  EXPECT_EQ(sasl->mechanisms,
            (std::vector<std::string_view>{"SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"}));

  w.clear();
  writeAuthSaslContinue(w, "r=abc,s=c2FsdA==,i=4096");
  const std::string cont_body = bodyOf(w, 'R', true);
  auto cont = parseAuthRequest(cont_body);
  ASSERT_TRUE(cont);
  EXPECT_EQ(cont->code, 11);
  EXPECT_EQ(cont->data, "r=abc,s=c2FsdA==,i=4096");

  w.clear();
  writeAuthSaslFinal(w, "v=xyz");
  const std::string fin_body = bodyOf(w, 'R', true);
  auto fin = parseAuthRequest(fin_body);
  ASSERT_TRUE(fin);
  EXPECT_EQ(fin->code, 12);
  EXPECT_EQ(fin->data, "v=xyz");
}

TEST(Codec, ParameterStatus) {
  std::string w;
  writeParameterStatus(w, "default_transaction_read_only", "on");
  EXPECT_EQ(w, Bytes().str("default_transaction_read_only").str("on").message('S'));
  const std::string m_body = bodyOf(w, 'S', true);
  auto m = parseParameterStatus(m_body);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->name, "default_transaction_read_only");
  EXPECT_EQ(m->value, "on");
}

TEST(Codec, BackendKeyData) {
  std::string w;
  writeBackendKeyData(w, 31337, -2);
  EXPECT_EQ(w, Bytes().i32(31337).i32(-2).message('K'));
  const std::string m_body = bodyOf(w, 'K', true);
  auto m = parseBackendKeyData(m_body);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->pid, 31337);
  EXPECT_EQ(m->key, -2);
}

TEST(Codec, ReadyForQuery) {
  for (char s : {'I', 'T', 'E'}) {
    std::string w;
    writeReadyForQuery(w, s);
    EXPECT_EQ(w, Bytes().u8(uint8_t(s)).message('Z'));
    const std::string m_body = bodyOf(w, 'Z', true);
    auto m = parseReadyForQuery(m_body);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, s);
  }
}

TEST(Codec, CommandComplete) {
  std::string w;
  writeCommandComplete(w, "SELECT 1000");
  EXPECT_EQ(w, Bytes().str("SELECT 1000").message('C'));
  const std::string m_body = bodyOf(w, 'C', true);
  auto m = parseCommandComplete(m_body);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->tag, "SELECT 1000");
}

TEST(Codec, EmptyBodiedBackendMessages) {
  std::string w;
  writeEmptyQueryResponse(w);
  writeParseComplete(w);
  writeBindComplete(w);
  writeCloseComplete(w);
  writeNoData(w);
  writePortalSuspended(w);
  EXPECT_EQ(w, Bytes()
                   .u8('I')
                   .u32(4)
                   .u8('1')
                   .u32(4)
                   .u8('2')
                   .u32(4)
                   .u8('3')
                   .u32(4)
                   .u8('n')
                   .u32(4)
                   .u8('s')
                   .u32(4)
                   .get());
}

TEST(Codec, ParameterDescription) {
  std::string w;
  writeParameterDescription(w, {23, 1043});
  EXPECT_EQ(w, Bytes().u16(2).u32(23).u32(1043).message('t'));
}

TEST(Codec, NegotiateProtocolVersion) {
  // PostgreSQL sends its newest whole version (3.0 = 196608), then the unrecognised options.
  std::string w;
  writeNegotiateProtocolVersion(w, 0, {"_pq_.a", "_pq_.b"});
  EXPECT_EQ(w, Bytes().u32(196608).u32(2).str("_pq_.a").str("_pq_.b").message('v'));
  w.clear();
  writeNegotiateProtocolVersion(w, kProtocolV3, {});
  EXPECT_EQ(w, Bytes().u32(196608).u32(0).message('v'));
}

TEST(Codec, RowDescription) {
  std::string w;
  writeRowDescription(w, {{"carrier", 25, -1, -1}, {"weight", 701, 8, -1}});
  EXPECT_EQ(w, Bytes()
                   .i16(2)
                   .str("carrier")
                   .u32(0)
                   .i16(0)
                   .u32(25)
                   .i16(-1)
                   .i32(-1)
                   .i16(0)
                   .str("weight")
                   .u32(0)
                   .i16(0)
                   .u32(701)
                   .i16(8)
                   .i32(-1)
                   .i16(0)
                   .message('T'));
  const std::string body = bodyOf(w, 'T', true);
  auto n = parseRowDescription(body);
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(n->columns, 2);
  auto f = parseRowDescriptionFields(body);
  ASSERT_TRUE(f) << f.error();
  ASSERT_EQ(f->size(), 2u);
  EXPECT_EQ((*f)[0].name, "carrier");
  EXPECT_EQ((*f)[0].type_oid, 25u);
  EXPECT_EQ((*f)[1].name, "weight");
  EXPECT_EQ((*f)[1].type_oid, 701u);
  EXPECT_EQ((*f)[1].type_len, 8);
  EXPECT_EQ((*f)[1].type_mod, -1);
}

TEST(Codec, RowDescriptionFromServerLayout) {
  // Table OID, column number and a binary format code as a server sends them.
  const std::string body =
      Bytes().i16(1).str("id").u32(16384).i16(1).u32(23).i16(4).i32(-1).i16(1).get();
  auto f = parseRowDescriptionFields(body);
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ((*f)[0].table_oid, 16384u);
  EXPECT_EQ((*f)[0].column, 1);
  EXPECT_EQ((*f)[0].format, 1);
}

TEST(Codec, DataRow) {
  const std::vector<std::optional<std::string_view>> values = {std::string_view("DELIVERED"),
                                                               std::nullopt, std::string_view(""),
                                                               std::string_view("\x01\x00\x02", 3)};
  std::string w;
  writeDataRow(w, values);
  EXPECT_EQ(w, Bytes()
                   .i16(4)
                   .i32(9)
                   .raw("DELIVERED")
                   .i32(-1)
                   .i32(0)
                   .i32(3)
                   .raw(std::string_view("\x01\x00\x02", 3))
                   .message('D'));
  const std::string body = bodyOf(w, 'D', true);
  auto n = parseDataRow(body);
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(n->columns, 4);
  auto v = parseDataRowValues(body);
  ASSERT_TRUE(v) << v.error();
  EXPECT_EQ(*v, values);
}

TEST(Codec, DataRowFirstValue) {
  std::string w;
  writeDataRow(w, {std::string_view("0"), std::nullopt});
  std::optional<std::string_view> first;
  const std::string body = bodyOf(w, 'D', true);  // `first` views it
  auto n = parseDataRowFirst(body, &first);
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(n->columns, 2);
  EXPECT_EQ(first, std::optional<std::string_view>("0"));
  w.clear();
  writeDataRow(w, {std::nullopt});
  first = std::string_view("stale");
  ASSERT_TRUE(parseDataRowFirst(bodyOf(w, 'D', true), &first));
  EXPECT_FALSE(first.has_value());
  EXPECT_FALSE(parseDataRowFirst(Bytes().i16(1).i32(5).raw("ab").get(), &first));
}

TEST(Codec, DataRowNoColumns) {
  std::string w;
  writeDataRow(w, {});
  const std::string v_body = bodyOf(w, 'D', true);
  auto v = parseDataRowValues(v_body);
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->empty());
}

TEST(Codec, CopyResponse) {
  auto m = parseCopyResponse(Bytes().u8(0).i16(3).i16(0).i16(0).i16(0).get());
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->format, 0);
  EXPECT_EQ(m->column_formats, (std::vector<int16_t>{0, 0, 0}));
  auto b = parseCopyResponse(Bytes().u8(1).i16(1).i16(1).get());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->format, 1);
}

TEST(Codec, EncodersAppend) {
  // Messages accumulate in one buffer, ready for a single write.
  std::string w = "prefix";
  writeSync(w);
  writeQuery(w, "x");
  EXPECT_EQ(w, "prefix" + Bytes().u8('S').u32(4).get() + Bytes().str("x").message('Q'));
}

}  // namespace
}  // namespace pgwarden::protocol
