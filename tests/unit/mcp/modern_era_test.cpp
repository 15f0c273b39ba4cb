// The 2026-07-28 request checks: which requests are modern, the headers against the body, the
// version errors with the supported list, and the Base64 sentinel of header values.
#include "mcp/modern_era.h"

#include <gtest/gtest.h>

namespace pgwarden::mcp {
namespace {

RpcMessage request(std::string method, Json params) {
  RpcMessage m;
  m.id = 7;
  m.method = std::move(method);
  m.params = std::move(params);
  return m;
}

Json meta(std::string version = kModernProtocolVersion) {
  return {{kMetaProtocolVersion, version},
          {kMetaClientInfo, {{"name", "agent"}, {"version", "2"}}},
          {kMetaClientCapabilities, Json::object()}};
}

TEST(ModernEra, ModernByHeaderOrByMetaWithoutSession) {
  const std::string body =
      R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})";
  EXPECT_TRUE(looksModern("2026-07-28", false, "{}"));
  EXPECT_TRUE(looksModern("", false, body));
  EXPECT_FALSE(looksModern("", true, body));
  EXPECT_FALSE(looksModern("2025-11-25", false, R"({"jsonrpc":"2.0","id":1,"method":"ping"})"));
  EXPECT_FALSE(looksModern(
      "", false,
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}})"));
  EXPECT_FALSE(looksModern(
      "", false, std::string(10000, '[') + "\"io.modelcontextprotocol/protocolVersion\""));
}

TEST(ModernEra, AcceptsMatchingHeadersAndReadsTheClient) {
  ModernMeta out;
  const auto m = request("tools/call", {{"name", "query"}, {"_meta", meta()}});
  EXPECT_FALSE(checkModernRequest(m, {"2026-07-28", "tools/call", std::string_view("query")}, out));
  EXPECT_EQ(out.client_name, "agent");
  EXPECT_EQ(out.protocol_version, "2026-07-28");
}

TEST(ModernEra, UnsupportedVersionListsTheSupported) {
  ModernMeta out;
  const auto r = checkModernRequest(request("tools/list", {{"_meta", meta("1900-01-01")}}),
                                    {"1900-01-01", "tools/list", {}}, out);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body["error"]["code"], kUnsupportedProtocolVersion);
  EXPECT_EQ(r->body["error"]["data"]["requested"], "1900-01-01");
  EXPECT_EQ(r->body["error"]["data"]["supported"],
            Json::array({"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}));
  EXPECT_EQ(r->body["id"], 7);
}

TEST(ModernEra, HeaderMismatchesAndMissingHeaders) {
  ModernMeta out;
  const auto call = request("tools/call", {{"name", "query"}, {"_meta", meta()}});
  for (const ModernHeaders& h :
       {ModernHeaders{"2026-07-28", "tools/list", std::string_view("query")},
        ModernHeaders{"2026-07-28", "", std::string_view("query")},
        ModernHeaders{"2026-07-28", "tools/call", std::string_view("explain")},
        ModernHeaders{"2026-07-28", "tools/call", std::nullopt},
        ModernHeaders{"", "tools/call", std::string_view("query")}}) {
    const auto r = checkModernRequest(call, h, out);
    ASSERT_TRUE(r) << h.method;
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(r->body["error"]["code"], kHeaderMismatch);
  }
  // The header names a served version and the body one that is not: the two differ.
  const auto r = checkModernRequest(request("server/discover", {{"_meta", meta("v999.0.0")}}),
                                    {"2026-07-28", "server/discover", {}}, out);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body["error"]["code"], kHeaderMismatch);
}

TEST(ModernEra, AMissingMetaOrVersionIsInvalidParams) {
  ModernMeta out;
  Json no_version = meta();
  no_version.erase(kMetaProtocolVersion);
  for (const Json& params : {Json::object(), Json{{"_meta", no_version}}}) {
    const auto r = checkModernRequest(request("server/discover", params),
                                      {"2026-07-28", "server/discover", {}}, out);
    ASSERT_TRUE(r) << params.dump();
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(r->body["error"]["code"], kInvalidParams) << params.dump();
  }
}

TEST(ModernEra, CapabilitiesAreRequired) {
  ModernMeta out;
  Json no_caps = meta();
  no_caps.erase(kMetaClientCapabilities);
  const auto r = checkModernRequest(request("tools/list", {{"_meta", no_caps}}),
                                    {"2026-07-28", "tools/list", {}}, out);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body["error"]["code"], kInvalidParams);
}

TEST(ModernEra, LegacyVersionWithoutSessionIsTold) {
  ModernMeta out;
  const auto r = checkModernRequest(request("tools/list", {{"_meta", meta("2025-11-25")}}),
                                    {"2025-11-25", "tools/list", {}}, out);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body["error"]["code"], kInvalidRequest);
}

TEST(ModernEra, Base64SentinelNames) {
  EXPECT_EQ(decodeHeaderValue("query"), "query");
  EXPECT_EQ(decodeHeaderValue("=?base64?SGVsbG8sIOS4lueVjA==?="),
            "Hello, \xe4\xb8\x96\xe7\x95\x8c");
  EXPECT_EQ(decodeHeaderValue("=?base64?IHBhZGRlZCA=?="), " padded ");
  EXPECT_FALSE(decodeHeaderValue("=?base64?abc?="));
  ModernMeta out;
  const auto m = request("tools/call", {{"name", " padded "}, {"_meta", meta()}});
  EXPECT_FALSE(checkModernRequest(
      m, {"2026-07-28", "tools/call", std::string_view("=?base64?IHBhZGRlZCA=?=")}, out));
}

TEST(ModernEra, ResultsCarryTypeServerAndCaching) {
  const Json r =
      cacheableResult(modernResult({{"tools", Json::array()}}, "1.2"), kListTtlMs, "private");
  EXPECT_EQ(r["resultType"], "complete");
  EXPECT_EQ(r["_meta"][kMetaServerInfo]["name"], "pgwarden");
  EXPECT_EQ(r["ttlMs"], kListTtlMs);
  EXPECT_EQ(r["cacheScope"], "private");
}

}  // namespace
}  // namespace pgwarden::mcp
