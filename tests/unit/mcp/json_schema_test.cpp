// The tool-argument schema subset: what compile() refuses and where it says so, what validate()
// lets through and the words it gives the model when it does not, defaults, the formats, and
// garbage that must never crash it.
#include "mcp/json_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mcp/json_formats.h"

namespace pgwarden::mcp {
namespace {

// The shipment-search tool of the docs: the shape most operator schemas will have.
const char* const kShipmentsText = R"({
  "type": "object",
  "properties": {
    "from": {"type": "string", "format": "date", "description": "first day"},
    "to": {"type": "string", "format": "date"},
    "status": {"enum": ["DELIVERED", "DELAYED", "RETURNED"], "default": "DELAYED"},
    "carrier": {"type": "string", "minLength": 2, "maxLength": 20, "pattern": "^[A-Za-z ]+$"}
  },
  "required": ["from", "to"],
  "additionalProperties": false
})";
const Json kShipments = Json::parse(kShipmentsText);

JsonSchema compiled(const Json& schema) {
  auto s = JsonSchema::compile(schema);
  EXPECT_TRUE(s.ok()) << s.error();
  return s.ok() ? std::move(s).value() : JsonSchema();
}

// ---- compile --------------------------------------------------------------------------------

struct CompileError {
  const char* schema;
  const char* error;  // the whole message, pointer first
};

class CompileRefuses : public testing::TestWithParam<CompileError> {};

TEST_P(CompileRefuses, NamingThePointer) {
  auto s = JsonSchema::compile(Json::parse(GetParam().schema));
  ASSERT_FALSE(s.ok()) << GetParam().schema;
  EXPECT_EQ(s.error(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Schemas, CompileRefuses,
    testing::Values(
        CompileError{R"({"properties": {"from": {"type": "string", "format": "ipv4"}}})",
                     "/properties/from/format: unsupported format \"ipv4\"; the supported "
                     "formats are date, date-time, time, uuid, email"},
        CompileError{R"({"properties": {"x": {"oneOf": [{}, {}]}}})",
                     "/properties/x/oneOf: unsupported keyword \"oneOf\""},
        CompileError{R"({"$ref": "#/defs/a"})", "/$ref: unsupported keyword \"$ref\""},
        CompileError{R"({"patternProperties": {"^a": {}}})",
                     "/patternProperties: unsupported keyword \"patternProperties\""},
        CompileError{R"({"properties": {"a/b": {"allOf": []}}})",
                     "/properties/a~1b/allOf: unsupported keyword \"allOf\""},
        CompileError{R"({"minLength": "3"})",
                     "/minLength: minLength must be a non-negative integer"},
        CompileError{R"({"maxItems": -1})", "/maxItems: maxItems must be a non-negative integer"},
        CompileError{R"({"minItems": 1.5})", "/minItems: minItems must be a non-negative integer"},
        CompileError{R"({"required": "to"})",
                     "/required: required must be an array of property names"},
        CompileError{R"({"required": ["to", 3]})",
                     "/required: required must be an array of property names"},
        CompileError{R"({"additionalProperties": {"type": "string"}})",
                     "/additionalProperties: additionalProperties must be true or false; a schema "
                     "here is not supported"},
        CompileError{R"({"type": "date"})",
                     "/type: unknown type \"date\"; the types are null, boolean, object, array, "
                     "number, string, integer"},
        CompileError{R"({"type": []})", "/type: type must not be an empty array"},
        CompileError{R"({"type": ["string", 1]})",
                     "/type: type must be a type name or an array of them"},
        CompileError{R"({"enum": []})", "/enum: enum must be a non-empty array"},
        CompileError{R"({"enum": "a"})", "/enum: enum must be a non-empty array"},
        CompileError{R"({"minimum": "1"})", "/minimum: minimum must be a number"},
        CompileError{R"({"multipleOf": 0})", "/multipleOf: multipleOf must be greater than 0"},
        CompileError{R"({"uniqueItems": 1})", "/uniqueItems: uniqueItems must be true or false"},
        CompileError{R"({"format": 3})", "/format: format must be a string"},
        CompileError{
            R"({"items": [{"type": "string"}]})",
            "/items: the array form of items (tuple validation) is not supported; give one "
            "schema for every item"},
        CompileError{R"({"items": {"properties": {"a": true}}})",
                     "/items/properties/a: boolean schemas are not supported; write {} or a schema "
                     "object"},
        CompileError{R"({"properties": []})",
                     "/properties: properties must be an object of schemas"},
        CompileError{R"({"properties": {"a": 3}})", "/properties/a: a schema must be an object"},
        CompileError{R"({"description": 3})", "/description: description must be a string"},
        CompileError{R"({"examples": "x"})", "/examples: examples must be an array"},
        CompileError{R"({"minLength": 5, "maxLength": 2})",
                     "(root): minLength is greater than maxLength; no string would pass"},
        CompileError{R"("string")", "(root): a schema must be an object"},
        CompileError{R"(true)",
                     "(root): boolean schemas are not supported; write {} or a schema object"}));

TEST(JsonSchemaCompile, ABadPatternNamesItsPointer) {
  auto s = JsonSchema::compile(Json::parse(R"({"properties": {"code": {"pattern": "([a-z"}}})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().rfind("/properties/code/pattern: invalid regular expression \"([a-z\"", 0),
            0u)
      << s.error();
}

TEST(JsonSchemaCompile, AcceptsTheWholeSubsetAndAnnotations) {
  auto s = JsonSchema::compile(Json::parse(R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema", "$comment": "c", "title": "t",
    "description": "d", "examples": [{}], "type": ["object", "null"],
    "properties": {
      "n": {"type": "number", "minimum": 0, "maximum": 10.5, "exclusiveMinimum": -1,
            "exclusiveMaximum": 11, "multipleOf": 0.5, "const": 1, "default": 1},
      "s": {"type": "string", "minLength": 1, "maxLength": 3.0, "pattern": "^a", "format": "uuid",
            "enum": ["a"]},
      "a": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2,
            "uniqueItems": true}
    },
    "required": [], "additionalProperties": true})"));
  EXPECT_TRUE(s.ok()) << s.error();
}

TEST(JsonSchemaCompile, RefusesASchemaNestedBeyondTheJsonDepth) {
  Json schema = Json::object();
  for (int i = 0; i < 100; ++i) schema = Json{{"items", schema}};
  auto s = JsonSchema::compile(schema);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("nests too deeply"), std::string::npos) << s.error();
}

TEST(JsonSchemaCompile, PropertyNamesAndTypes) {
  auto s = compiled(Json::parse(R"({"properties": {
      "zeta": {"type": "integer"}, "alpha": {"type": ["string", "null"]}, "mid": {}}})"));
  // nlohmann::json sorts keys: that is the order the schema arrives in.
  EXPECT_EQ(s.propertyNames(), (std::vector<std::string>{"alpha", "mid", "zeta"}));
  EXPECT_EQ(s.propertyType("zeta"), "integer");
  EXPECT_EQ(s.propertyType("alpha"), "");
  EXPECT_EQ(s.propertyType("mid"), "");
  EXPECT_EQ(s.propertyType("absent"), "");
  EXPECT_EQ(s.source(), Json::parse(R"({"properties": {
      "zeta": {"type": "integer"}, "alpha": {"type": ["string", "null"]}, "mid": {}}})"));
}

// ---- validate: what passes ------------------------------------------------------------------

struct Passes {
  const char* schema;
  const char* instance;
};

class ValidatePasses : public testing::TestWithParam<Passes> {};

TEST_P(ValidatePasses, WithNoViolation) {
  auto s = compiled(Json::parse(GetParam().schema));
  auto v = s.validate(Json::parse(GetParam().instance));
  EXPECT_TRUE(v.empty()) << GetParam().schema << " on " << GetParam().instance << ": "
                         << (v.empty() ? "" : v[0].message);
}

INSTANTIATE_TEST_SUITE_P(
    Instances, ValidatePasses,
    testing::Values(
        Passes{R"({"type": "integer"})", "3"}, Passes{R"({"type": "integer"})", "3.0"},
        Passes{R"({"type": "integer"})", "-9223372036854775808"},
        Passes{R"({"type": "integer"})", "18446744073709551615"},
        Passes{R"({"type": "number"})", "3"}, Passes{R"({"type": ["string", "null"]})", "null"},
        Passes{R"({"minimum": 9007199254740993})", "9007199254740993"},
        Passes{R"({"maximum": 9007199254740992.0})", "9007199254740992"},
        Passes{R"({"exclusiveMinimum": 0})", "0.0001"},
        Passes{R"({"exclusiveMaximum": 1})", "0.99"}, Passes{R"({"multipleOf": 0.01})", "19.99"},
        Passes{R"({"multipleOf": 3})", "-9"},
        Passes{R"({"multipleOf": 7})", "-9223372036854775807"},
        Passes{R"({"multipleOf": 7})", "18446744073709551614"},
        Passes{R"({"minLength": 3, "maxLength": 3})", R"("日本語")"},
        Passes{R"({"maxLength": 2})", R"("😀😀")"}, Passes{R"({"enum": [1, "a"]})", "1.0"},
        Passes{R"({"const": {"a": [1, 2]}})", R"({"a": [1.0, 2]})"},
        Passes{R"({"pattern": "[0-9]+"})", R"("abc123")"},
        Passes{R"({"format": "date"})", R"("2024-02-29")"},
        Passes{R"({"format": "date"})", "17"},  // formats apply to strings only
        Passes{R"({"format": "date-time"})", R"("2024-07-01t13:45:00.5+02:00")"},
        Passes{R"({"format": "time"})", R"("23:59:60Z")"},
        Passes{R"({"format": "uuid"})", R"("123e4567-E89B-12d3-a456-426614174000")"},
        Passes{R"({"format": "email"})", R"("ops@example.com")"},
        Passes{
            R"({"items": {"type": "integer"}, "minItems": 1, "maxItems": 3, "uniqueItems": true})",
            "[1, 2, 3]"},
        Passes{R"({"uniqueItems": true})", R"([1, true, "1", [1], {"a": 1}])"},
        Passes{R"({"properties": {"a": {}}, "additionalProperties": true})", R"({"b": 1})"},
        Passes{R"({"required": ["a"]})", R"({"a": null})"},
        Passes{R"({"required": ["a"]})", R"([])"}));  // required applies to objects only

TEST(JsonSchemaValidate, TheDocumentedToolCallPasses) {
  auto s = compiled(kShipments);
  EXPECT_TRUE(
      s
          .validate(Json::parse(
              R"({"from": "2024-07-01", "to": "2024-07-31", "status": "DELAYED", "carrier": "DHL"})"))
          .empty());
}

TEST(JsonSchemaValidate, SqlInAStringPassesAPlainStringSchemaUntouched) {
  auto s = compiled(Json::parse(R"({"properties": {"q": {"type": "string"}}})"));
  Json args = {{"q", "'); DROP TABLE x; --"}};
  EXPECT_TRUE(s.validate(args).empty());
  EXPECT_EQ(s.withDefaults(args), args);
  EXPECT_EQ(s.withDefaults(args)["q"], "'); DROP TABLE x; --");
}

// ---- validate: each rule broken, and what the model is told -----------------------------------

struct Fails {
  std::string schema;
  const char* instance;
  const char* path;
  const char* keyword;
  const char* message;
  const char* expected;  // JSON text
};

class ValidateFails : public testing::TestWithParam<Fails> {};

TEST_P(ValidateFails, WithOneViolationThatSaysWhatPasses) {
  const auto& p = GetParam();
  auto s = compiled(Json::parse(p.schema));
  auto v = s.validate(Json::parse(p.instance));
  ASSERT_EQ(v.size(), 1u) << p.schema << " on " << p.instance;
  EXPECT_EQ(v[0].path, p.path);
  EXPECT_EQ(v[0].keyword, p.keyword);
  EXPECT_EQ(v[0].message, p.message);
  EXPECT_EQ(v[0].expected, Json::parse(p.expected));
}

INSTANTIATE_TEST_SUITE_P(
    Rules, ValidateFails,
    testing::Values(
        Fails{kShipmentsText, R"({"from": "July 1", "to": "2024-07-31"})", "/from", "format",
              R"("from" must be a date (YYYY-MM-DD); got "July 1")", R"("date")"},
        Fails{kShipmentsText, R"({"from": "2024-07-01", "to": "2024-07-31", "status": "late"})",
              "/status", "enum",
              R"("status" must be one of DELIVERED, DELAYED, RETURNED; got "late")",
              R"(["DELIVERED", "DELAYED", "RETURNED"])"},
        Fails{kShipmentsText, R"({"from": "2024-07-01", "to": "2024-07-31", "limit": 5})", "/limit",
              "additionalProperties",
              R"(unknown argument "limit"; the arguments are: carrier, from, status, to)",
              R"(["carrier", "from", "status", "to"])"},
        Fails{kShipmentsText, R"({"from": "2024-07-01"})", "/to", "required",
              R"(missing required argument "to")", R"(["from", "to"])"},
        Fails{kShipmentsText, R"([1])", "", "type",
              R"(the arguments must be an object; got an array [1])", R"("object")"},
        Fails{
            R"({"properties": {"f": {"properties": {"k": {}, "id": {}}, "required": ["id"], "additionalProperties": false}}})",
            R"({"f": {"k": 1, "id": 2, "x": 3}})", "/f/x", "additionalProperties",
            R"(unknown field "x" in "f"; the fields are: id, k)", R"(["id", "k"])"},
        Fails{R"({"properties": {"f": {"required": ["id"]}}})", R"({"f": {}})", "/f/id", "required",
              R"(missing required field "id" in "f")", R"(["id"])"},
        Fails{R"({"additionalProperties": false})", R"({"x": 1})", "/x", "additionalProperties",
              R"(unknown argument "x"; it takes none)", "[]"},
        Fails{R"({"properties": {"n": {"type": "integer"}}})", R"({"n": 3.5})", "/n", "type",
              R"("n" must be an integer; got the number 3.5)", R"("integer")"},
        Fails{R"({"properties": {"n": {"type": ["integer", "null"]}}})", R"({"n": "3"})", "/n",
              "type", R"("n" must be an integer or null; got a string "3")",
              R"(["integer", "null"])"},
        Fails{R"({"properties": {"n": {"type": "string"}}})", R"({"n": true})", "/n", "type",
              R"("n" must be a string; got true)", R"("string")"},
        Fails{R"({"properties": {"n": {"minimum": 1}}})", R"({"n": 0})", "/n", "minimum",
              R"("n" must be at least 1; got 0)", "1"},
        Fails{R"({"properties": {"n": {"maximum": 100}}})", R"({"n": 100.5})", "/n", "maximum",
              R"("n" must be at most 100; got 100.5)", "100"},
        Fails{R"({"properties": {"n": {"exclusiveMinimum": 0}}})", R"({"n": 0})", "/n",
              "exclusiveMinimum", R"("n" must be greater than 0; got 0)", "0"},
        Fails{R"({"properties": {"n": {"exclusiveMaximum": 1.5}}})", R"({"n": 1.5})", "/n",
              "exclusiveMaximum", R"("n" must be less than 1.5; got 1.5)", "1.5"},
        Fails{R"({"maximum": 9007199254740992})", "9007199254740993", "", "maximum",
              "the arguments must be at most 9007199254740992; got 9007199254740993",
              "9007199254740992"},
        Fails{R"({"properties": {"n": {"multipleOf": 5}}})", R"({"n": 12})", "/n", "multipleOf",
              R"("n" must be a multiple of 5; got 12)", "5"},
        Fails{R"({"properties": {"n": {"multipleOf": 0.01}}})", R"({"n": 0.005})", "/n",
              "multipleOf", R"("n" must be a multiple of 0.01; got 0.005)", "0.01"},
        Fails{R"({"properties": {"s": {"minLength": 3}}})", R"({"s": "日本"})", "/s", "minLength",
              R"("s" must be at least 3 characters long; got 2 characters ("日本"))", "3"},
        Fails{R"({"properties": {"s": {"maxLength": 1}}})", R"({"s": "ab"})", "/s", "maxLength",
              R"("s" must be at most 1 character long; got 2 characters ("ab"))", "1"},
        Fails{R"({"properties": {"s": {"pattern": "^[A-Z]{3}$"}}})", R"({"s": "abc"})", "/s",
              "pattern", R"("s" must match the regular expression "^[A-Z]{3}$"; got "abc")",
              R"("^[A-Z]{3}$")"},
        Fails{R"({"properties": {"s": {"enum": [1, null, "x"]}}})", R"({"s": "1"})", "/s", "enum",
              R"("s" must be one of 1, null, x; got "1")", R"([1, null, "x"])"},
        Fails{R"({"properties": {"s": {"const": "on"}}})", R"({"s": "off"})", "/s", "const",
              R"("s" must be exactly "on"; got "off")", R"("on")"},
        Fails{R"({"properties": {"a": {"minItems": 2}}})", R"({"a": [1]})", "/a", "minItems",
              R"("a" must have at least 2 items; got 1 item)", "2"},
        Fails{R"({"properties": {"a": {"maxItems": 1}}})", R"({"a": [1, 2]})", "/a", "maxItems",
              R"("a" must have at most 1 item; got 2 items)", "1"},
        Fails{R"({"properties": {"a": {"uniqueItems": true}}})", R"({"a": [1, 2, 1.0]})", "/a",
              "uniqueItems", R"("a" must not repeat items; items 0 and 2 are both 1)", "true"},
        Fails{R"({"properties": {"a": {"items": {"type": "integer"}}}})", R"({"a": [1, "2"]})",
              "/a/1", "type", R"("a/1" must be an integer; got a string "2")", R"("integer")"},
        Fails{R"({"properties": {"d": {"format": "date"}}})", R"({"d": "2023-02-29"})", "/d",
              "format", R"("d" must be a date (YYYY-MM-DD); got "2023-02-29")", R"("date")"},
        Fails{
            R"({"properties": {"u": {"format": "uuid"}}})",
            R"({"u": "123e4567e89b12d3a456426614174000"})", "/u", "format",
            R"("u" must be a UUID (8-4-4-4-12 hexadecimal digits); got "123e4567e89b12d3a456426614174000")",
            R"("uuid")"},
        Fails{R"({"properties": {"e": {"format": "email"}}})", R"({"e": "ops at example.com"})",
              "/e", "format",
              R"("e" must be an email address (name@example.com); got "ops at example.com")",
              R"("email")"}));

TEST(JsonSchemaValidate, ReportsEveryViolationInDocumentOrderUpToTheLimit) {
  auto s = compiled(kShipments);
  Json args = Json::parse(R"({"from": "x", "to": "y", "status": "z", "carrier": "1", "a": 1})");
  auto all = s.validate(args);
  std::vector<std::string> paths;
  for (const auto& v : all) paths.push_back(v.path + " " + v.keyword);
  // nlohmann::json keeps an object's keys sorted, so "document order" is the keys' order.
  EXPECT_EQ(paths, (std::vector<std::string>{"/a additionalProperties", "/carrier minLength",
                                             "/carrier pattern", "/from format", "/status enum",
                                             "/to format"}));
  EXPECT_EQ(s.validate(args, 2).size(), 2u);
  EXPECT_TRUE(s.validate(args, 0).empty());
}

TEST(JsonSchemaValidate, EchoesAtMostEightyCharactersOfAValue) {
  auto s = compiled(Json::parse(R"({"properties": {"d": {"format": "date"}}})"));
  std::string longValue(5000, 'x');
  auto v = s.validate(Json{{"d", longValue}});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_LT(v[0].message.size(), 160u) << v[0].message;
  EXPECT_NE(v[0].message.find("..."), std::string::npos);
  // A cut through a multi-byte character would make the message unserialisable.
  std::string wide;
  for (int i = 0; i < 100; ++i) wide += "é";
  v = s.validate(Json{{"d", wide}});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NO_THROW((void)Json(v[0].message).dump());
}

TEST(JsonSchemaValidate, RefusesLongStringsUnderAPatternInsteadOfRiskingTheStack) {
  auto s = compiled(Json::parse(R"({"properties": {"s": {"pattern": "^(a|b)*$"}}})"));
  EXPECT_TRUE(s.validate(Json{{"s", std::string(1024, 'a')}}).empty());
  auto v = s.validate(Json{{"s", std::string(100000, 'a')}});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].keyword, "pattern");
  EXPECT_EQ(v[0].expected, 1024);
  EXPECT_EQ(v[0].message,
            "\"s\" is 100000 characters long; a value checked against a pattern may be at most "
            "1024 characters, so send a shorter one");
}

// ---- defaults -------------------------------------------------------------------------------

TEST(JsonSchemaDefaults, FillsAbsentPropertiesRecursively) {
  auto s = compiled(Json::parse(R"({"properties": {
    "limit": {"type": "integer", "default": 50},
    "status": {"default": "DELAYED"},
    "page": {"type": "object", "properties": {"size": {"default": 10}, "n": {"default": 1}},
             "default": {}},
    "opts": {"properties": {"deep": {"default": true}}},
    "rows": {"items": {"properties": {"w": {"default": 0}}}}
  }})"));
  EXPECT_EQ(
      s.withDefaults(Json::parse(R"({"status": "DELIVERED", "opts": {}, "rows": [{}, {"w": 2}]})")),
      Json::parse(R"({"limit": 50, "status": "DELIVERED", "page": {"size": 10, "n": 1},
                            "opts": {"deep": true}, "rows": [{"w": 0}, {"w": 2}]})"));
  EXPECT_EQ(s.withDefaults(Json::parse(R"({"page": {"n": 7}})"))["page"],
            Json::parse(R"({"size": 10, "n": 7})"));
  // Not an object: nothing to fill.
  EXPECT_EQ(s.withDefaults(Json("x")), Json("x"));
}

// ---- formats --------------------------------------------------------------------------------

TEST(JsonFormats, NamesRoundTrip) {
  for (auto f : {StringFormat::kDate, StringFormat::kDateTime, StringFormat::kTime,
                 StringFormat::kUuid, StringFormat::kEmail}) {
    EXPECT_EQ(parseStringFormat(formatName(f)), f);
    EXPECT_FALSE(formatDescription(f).empty());
  }
  EXPECT_FALSE(parseStringFormat("ipv4"));
  EXPECT_FALSE(parseStringFormat("Date"));
}

TEST(JsonFormats, Dates) {
  for (const char* ok : {"2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01"})
    EXPECT_TRUE(isDate(ok)) << ok;
  for (const char* bad :
       {"1900-02-29", "2023-02-29", "2024-04-31", "2024-13-01", "2024-00-10", "2024-01-00",
        "2024-1-01", "24-01-01", "2024/01/01", "2024-01-01 ", "July 1", "", "2024-01-0a"})
    EXPECT_FALSE(isDate(bad)) << bad;
}

TEST(JsonFormats, TimesAndDateTimes) {
  for (const char* ok : {"00:00:00Z", "23:59:59.999999z", "12:30:00+05:30", "08:00:00-00:00",
                         "23:59:60Z", "15:59:60-08:00"})
    EXPECT_TRUE(isTime(ok)) << ok;
  for (const char* bad :
       {"24:00:00Z", "12:60:00Z", "12:00:61Z", "12:00:00", "12:00:00.Z", "12:00:00+5:30",
        "12:00:00+24:00", "12:00:60Z", "12:00Z", "1:00:00Z", "12:00:00 Z"})
    EXPECT_FALSE(isTime(bad)) << bad;
  EXPECT_TRUE(isDateTime("2024-07-01T13:45:00Z"));
  EXPECT_TRUE(isDateTime("2024-07-01t13:45:00.123-07:00"));
  EXPECT_FALSE(isDateTime("2024-07-01 13:45:00Z"));
  EXPECT_FALSE(isDateTime("2024-02-30T13:45:00Z"));
  EXPECT_FALSE(isDateTime("2024-07-01T"));
  EXPECT_FALSE(isDateTime("2024-07-01"));
}

TEST(JsonFormats, UuidsAndEmails) {
  EXPECT_TRUE(isUuid("00000000-0000-0000-0000-000000000000"));
  EXPECT_TRUE(isUuid("ABCDEF01-2345-6789-abcd-ef0123456789"));
  EXPECT_FALSE(isUuid("ABCDEF01-2345-6789-abcd-ef012345678"));
  EXPECT_FALSE(isUuid("gbcdef01-2345-6789-abcd-ef0123456789"));
  EXPECT_FALSE(isUuid("{abcdef01-2345-6789-abcd-ef0123456789}"));
  for (const char* ok : {"a@b.c", "first.last+tag@mail.example.org"})
    EXPECT_TRUE(isEmail(ok)) << ok;
  for (const char* bad : {"", "@b.c", "a@", "a@b", "a@@b.c", "a@b@c.d", "a b@c.d", "a@b.c ", "a@.c",
                          "a@b.", "a\t@b.c"})
    EXPECT_FALSE(isEmail(bad)) << bad;
}

// ---- garbage ----------------------------------------------------------------------------------

Json randomJson(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 3 ? 5 : 7);
  switch (kind(rng)) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng()) - (int64_t{1} << 31);
    case 3:
      return std::ldexp(static_cast<double>(rng()) - 2147483648.0,
                        static_cast<int>(rng() % 140) - 70);
    case 4:
      return rng() % 2 ? Json(std::numeric_limits<uint64_t>::max() - rng() % 3) : Json(-0.0);
    case 5: {
      std::string s;
      size_t n = rng() % 3 == 0 ? rng() % 2000 : rng() % 12;
      static const std::string kPieces[] = {
          "a",  "Z",          "0",         "-",  ":",  "T",        "@",    ".",   " ", "é",
          "日", "2024-02-29", "12:00:00Z", "\\", "\"", "'); DROP", "\xff", "\xc3"};  // not UTF-8
      while (s.size() < n) s += kPieces[rng() % std::size(kPieces)];
      return s;
    }
    case 6: {
      Json a = Json::array();
      for (size_t i = rng() % 6; i > 0; --i) a.push_back(randomJson(rng, depth + 1));
      return a;
    }
    default: {
      static const char* kKeys[] = {"from", "to", "status", "carrier", "n",       "a",
                                    "s",    "f",  "x",      "",        "\xfe\"/~"};
      Json o = Json::object();
      for (size_t i = rng() % 6; i > 0; --i)
        o[kKeys[rng() % std::size(kKeys)]] = randomJson(rng, depth + 1);
      return o;
    }
  }
}

TEST(JsonSchemaGarbage, TenThousandRandomInstancesNeverCrashOrThrow) {
  std::vector<JsonSchema> schemas = {
      compiled(kShipments),
      compiled(Json::parse(R"({"type": "object", "properties": {
          "n": {"type": "integer", "minimum": -5, "exclusiveMaximum": 1e300, "multipleOf": 3},
          "x": {"type": "number", "multipleOf": 1e-300, "maximum": 18446744073709551615},
          "a": {"type": "array", "items": {"type": ["string", "number"], "maxLength": 5,
                "format": "date-time", "pattern": "^(a|é)+$"}, "uniqueItems": true, "maxItems": 3},
          "s": {"enum": ["a", 1, null, {"k": [1]}], "default": "a"},
          "f": {"properties": {"from": {"const": [1, {"a": null}]}}, "required": ["to"],
                "additionalProperties": false}},
        "required": ["n"], "additionalProperties": false})")),
  };
  std::mt19937 rng(20261202);
  size_t violations = 0;
  for (int i = 0; i < 10000; ++i) {
    Json instance = randomJson(rng, 0);
    for (const auto& s : schemas) {
      std::vector<SchemaViolation> v;
      ASSERT_NO_THROW(v = s.validate(instance)) << instance.dump();
      ASSERT_LE(v.size(), 16u);
      for (const auto& one : v) {
        ASSERT_FALSE(one.message.empty());
        ASSERT_NO_THROW((void)Json(one.message).dump()) << one.message;
        ASSERT_LT(one.message.size(), 700u) << one.message;
      }
      violations += v.size();
      ASSERT_NO_THROW((void)s.withDefaults(instance));
    }
  }
  EXPECT_GT(violations, 10000u);  // the garbage was refused, not waved through
}

TEST(JsonSchemaGarbage, DeeplyNestedEqualItemsDoNotExhaustTheStack) {
  // The transport refuses JSON deeper than kMaxJsonDepth, but validate() may be handed anything.
  auto deep = [] {
    Json j = 1;
    for (int i = 0; i < 5000; ++i) {
      Json next = Json::array();
      next.push_back(std::move(j));
      j = std::move(next);
    }
    return j;
  };
  Json items = Json::array();
  items.push_back(deep());
  items.push_back(deep());
  auto s = compiled(Json::parse(R"({"uniqueItems": true, "enum": [[1]]})"));
  auto v = s.validate(items);
  ASSERT_EQ(v.size(), 1u);  // too deep to compare: treated as distinct, so only enum fails
  EXPECT_EQ(v[0].keyword, "enum");
}

// A pattern that backtracks catastrophically on a near-miss ("aaaa...a!" against ^(a+)+$ tries
// every split of the a's: 2^40 of them) is cut off by the match limit: the call gets a violation
// saying so instead of stalling the loop that validates it.
TEST(JsonSchemaValidate, CatastrophicBacktrackingHitsTheMatchLimit) {
  auto s = compiled(Json::parse(R"({"properties": {"s": {"pattern": "^(a+)+$"}}})"));
  EXPECT_TRUE(s.validate(Json{{"s", std::string(40, 'a')}}).empty());
  auto v = s.validate(Json{{"s", std::string(40, 'a') + "!"}});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].path, "/s");
  EXPECT_EQ(v[0].keyword, "pattern");
  EXPECT_EQ(v[0].expected, "^(a+)+$");
  EXPECT_NE(v[0].message.find("match limit"), std::string::npos) << v[0].message;
  // The same near-miss against a pattern that does not backtrack is an ordinary mismatch.
  auto plain = compiled(Json::parse(R"({"properties": {"s": {"pattern": "^a+$"}}})"));
  v = plain.validate(Json{{"s", std::string(40, 'a') + "!"}});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].message.find("must match the regular expression"), std::string::npos)
      << v[0].message;
}

}  // namespace
}  // namespace pgwarden::mcp
