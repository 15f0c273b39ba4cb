#include "guards/masking.h"

#include <gtest/gtest.h>

#include "guard_test_util.h"
#include "protocol/messages.h"

namespace pgwarden::guards {
namespace {

std::shared_ptr<const analysis::TableStatsSnapshot> peopleStats() {
  return analysis::TableStatsSnapshot::fromRows(
      {{"public", "people", "10", "", "", "16500", R"({"id": 1, "ssn": 2, "name": 3})"},
       {"hr", "staff", "10", "", "", "16600", R"({"id": 1, "salary": 2})"}});
}

// A RowDescription body of (table OID, attnum, type OID) columns, as the server sends it.
std::string rowDescription(const std::vector<std::tuple<uint32_t, int16_t, uint32_t>>& cols) {
  std::vector<protocol::ColumnDesc> unused;
  std::string b;
  auto p16 = [&b](int v) {
    b.push_back(char(v >> 8 & 0xff));
    b.push_back(char(v & 0xff));
  };
  auto p32 = [&b](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(char(v >> s & 0xff));
  };
  p16(int(cols.size()));
  for (const auto& [oid, att, type] : cols) {
    b += "c";
    b.push_back('\0');
    p32(oid);
    p16(att);
    p32(type);
    p16(4);
    p32(0xffffffff);
    p16(0);
  }
  return b;
}

std::string dataRow(const std::vector<std::optional<std::string>>& values) {
  std::string b;
  b.push_back(0);
  b.push_back(char(values.size()));
  for (const auto& v : values) {
    const uint32_t n = v ? uint32_t(v->size()) : 0xffffffff;
    for (int s = 24; s >= 0; s -= 8) b.push_back(char(n >> s & 0xff));
    if (v) b += *v;
  }
  return b;
}

std::unique_ptr<Masking> makeMasking(bool as_null = false) {
  auto m = std::make_unique<Masking>(
      std::vector<MaskPattern>{{"public", "people", "ssn"}, {"hr", "*", "sal*"}}, as_null);
  m->setKey("0123456789abcdef0123456789abcdef");
  return m;
}

TEST(MaskToken, EqualValuesEqualTokensAndTheKeyMatters) {
  const std::string a = maskToken("k1", "123-45-6789");
  EXPECT_EQ(a, maskToken("k1", "123-45-6789"));
  EXPECT_NE(a, maskToken("k1", "123-45-6780"));
  EXPECT_NE(a, maskToken("k2", "123-45-6789"));
  EXPECT_EQ(a.size(), 18u);
  EXPECT_EQ(a.rfind("m_", 0), 0u);
}

TEST(MaskSet, ResolvesPatternsToOidAndAttnumAndFailsClosedOnUnknownTables) {
  const auto stats = peopleStats();
  const auto mp = makeMasking();
  const Masking& m = *mp;
  const auto set = m.resolve(stats.get());
  EXPECT_TRUE(set->masked(16500, 2));
  EXPECT_FALSE(set->masked(16500, 1));
  EXPECT_TRUE(set->masked(16600, 2));
  EXPECT_FALSE(set->masked(0, 0));                    // an expression: the guard's business
  EXPECT_FALSE(set->masked(1259, 1));                 // pg_class
  EXPECT_TRUE(set->masked(17000, 1));                 // a table created since the snapshot
  EXPECT_TRUE(m.resolve(nullptr)->masked(16500, 1));  // no snapshot yet: every user table
  EXPECT_EQ(m.resolve(stats.get()), set);             // resolved once per snapshot
  EXPECT_EQ(m.maskedNames("", "people", stats.get()), std::vector<std::string>{"ssn"});
  EXPECT_EQ(m.maskedNames("hr", "staff", stats.get()), std::vector<std::string>{"salary"});
  EXPECT_TRUE(m.maskedNames("", "other", stats.get()).empty());
  EXPECT_EQ(m.maskedNames("hr", "staff", nullptr), std::vector<std::string>{"*"});
}

TEST(MaskRows, DataRowCarriesTokensAndRowDescriptionSaysText) {
  const auto stats = peopleStats();
  const auto mp = makeMasking();
  const Masking& m = *mp;
  const std::string rd = rowDescription({{16500, 1, 23}, {16500, 2, 1043}, {0, 0, 20}});
  const RowMask mask = m.rowMask(rd, stats.get());
  ASSERT_EQ(mask.masked, (std::vector<bool>{false, true, false}));
  std::string out;
  appendMaskedRowDescription(out, rd, mask);
  auto fields = protocol::parseRowDescriptionFields(std::string_view(out).substr(5));
  ASSERT_TRUE(fields);
  EXPECT_EQ((*fields)[0].type_oid, 23u);
  EXPECT_EQ((*fields)[1].type_oid, 25u);
  EXPECT_EQ((*fields)[1].table_oid, 16500u);
  out.clear();
  appendMaskedDataRow(out, dataRow({"7", "123-45-6789", std::nullopt}), mask, m);
  EXPECT_EQ(out.find("123-45-6789"), std::string::npos);
  EXPECT_NE(out.find(maskToken(m.key(), "123-45-6789")), std::string::npos);
  EXPECT_NE(out.find("7"), std::string::npos);
  const uint32_t len = uint32_t(uint8_t(out[1])) << 24 | uint8_t(out[2]) << 16 |
                       uint8_t(out[3]) << 8 | uint8_t(out[4]);
  EXPECT_EQ(len + 1, out.size());
}

TEST(MaskRows, NullModeAndMalformedRowsNeverPassTheValue) {
  const auto mp = makeMasking(true);
  const Masking& m = *mp;
  RowMask mask{{false, true}, true, {}};
  std::string out;
  appendMaskedDataRow(out, dataRow({"a", "secret"}), mask, m);
  EXPECT_EQ(out.find("secret"), std::string::npos);
  std::string row = dataRow({"a", "secret"});
  row.resize(row.size() - 2);  // the second value is cut short
  out.clear();
  appendMaskedDataRow(out, row, mask, *makeMasking());
  EXPECT_EQ(out.find("secr"), std::string::npos);
}

TEST(MaskRows, ABinaryValueGetsTheTokenOfItsTextForm) {
  const auto mp = makeMasking();
  const Masking& m = *mp;
  // int4, numeric, uuid and text columns, all masked, all sent in binary format.
  RowMask mask{{true, true, true, true}, true, {23, 1700, 2950, 25}};
  const std::string int4("\x00\x00\x23\x2a", 4);  // 9002
  // numeric -1234.50 as numeric_send writes it: 2 base-10000 digits (1234, 5000), weight 0,
  // sign negative, dscale 2
  const std::string numeric("\x00\x02\x00\x00\x40\x00\x00\x02\x04\xd2\x13\x88", 12);
  const std::string uuid("\xc4\xca\x42\x38\xa0\xb9\x23\x82\x0d\xcc\x50\x9a\x6f\x75\x84\x9b", 16);
  std::string out;
  appendMaskedDataRow(out, dataRow({int4, numeric, uuid, "S002-SECRET"}), mask, m);
  std::string text;
  appendMaskedDataRow(
      text, dataRow({"9002", "-1234.50", "c4ca4238-a0b9-2382-0dcc-509a6f75849b", "S002-SECRET"}),
      RowMask{{true, true, true, true}, true, {}}, m);
  EXPECT_EQ(out, text);
}

TEST(MaskRows, BinaryFormsPrintAsTheServerPrintsThem) {
  EXPECT_EQ(binaryAsText(1700, std::string("\x00\x00\x00\x00\x00\x00\x00\x02", 8)), "0.00");
  // 0.0001: one digit (1) of weight -1, dscale 4
  EXPECT_EQ(binaryAsText(1700, std::string("\x00\x01\xff\xff\x00\x00\x00\x04\x00\x01", 10)),
            "0.0001");
  // 100000000: two digits (1, 0) of weight 2: 1 0000 0000
  EXPECT_EQ(binaryAsText(1700, std::string("\x00\x01\x00\x02\x00\x00\x00\x00\x00\x01", 10)),
            "100000000");
  EXPECT_EQ(binaryAsText(1700, std::string("\x00\x00\x00\x00\xc0\x00\x00\x00", 8)), "NaN");
  EXPECT_EQ(binaryAsText(20, std::string("\xff\xff\xff\xff\xff\xff\xff\xfe", 8)), "-2");
  EXPECT_EQ(binaryAsText(16, std::string("\x01", 1)), "t");
  EXPECT_EQ(binaryAsText(3802, std::string("\x01{\"a\": 1}")), "{\"a\": 1}");
  EXPECT_FALSE(binaryAsText(23, "abc"));  // malformed
  EXPECT_FALSE(
      binaryAsText(1082, std::string("\x00\x00\x00\x01", 4)));  // date: depends on DateStyle
}

TEST(MaskedColumnsGuard, RefusesWhatWouldShowAValueAndAllowsCountsAndGroups) {
  const auto groups = test::groupsFromYaml(R"(
agents:
  masked_columns: [public.people.ssn]
  guards:
    - kind: read_only
)");
  const auto& g = *groups.at("agents");
  ASSERT_NE(g.masking(), nullptr);
  const auto stats = peopleStats();
  for (const char* ok : {"SELECT ssn, name FROM people", "SELECT count(DISTINCT ssn) FROM people",
                         "SELECT ssn, count(*) FROM people GROUP BY ssn", "SELECT * FROM people",
                         "SELECT name FROM people WHERE ssn = '1'", "SELECT 1"}) {
    EXPECT_FALSE(test::evaluate(g, ok, stats.get()).denied) << ok;
  }
  for (const char* bad :
       {"SELECT ssn::int FROM people", "SELECT min(ssn) FROM people",
        "SELECT row_to_json(p) FROM people p", "COPY (SELECT ssn FROM people) TO STDOUT",
        "DECLARE c CURSOR FOR SELECT ssn FROM people", "SELECT most_common_vals FROM pg_stats"}) {
    const Decision d = test::evaluate(g, bad, stats.get());
    ASSERT_TRUE(d.denied) << bad;
    EXPECT_EQ(d.deny.code, "MASKED_COLUMN") << bad;
  }
  const Decision d = test::evaluate(g, "SELECT ssn || 'x' FROM people", stats.get());
  EXPECT_NE(d.deny.message.find("column ssn of people is masked"), std::string::npos)
      << d.deny.message;
}

TEST(MaskedColumnsGuard, ConfigNamesABadPattern) {
  EXPECT_THROW(test::groupsFromYaml("g:\n  masked_columns: [people.ssn]\n"), std::exception);
  EXPECT_THROW(test::groupsFromYaml("g:\n  masked_columns: [a.b.c]\n  masked_as: blank\n"),
               std::exception);
}

}  // namespace
}  // namespace pgwarden::guards
