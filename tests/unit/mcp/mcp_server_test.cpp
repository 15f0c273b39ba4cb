// The MCP front end over HTTP with a fake host (mcp_harness.h): tools/call finds the tool by
// name (an unknown one, or a write tool outside a guarded_writes group, is a protocol error),
// arguments that break the tool's schema come back as a tool result the model can fix (a
// protocol error before 2025-11-25), and a statement the policy refuses comes back as a denial:
// code, SQLSTATE, next step, pgwarden's words first in the text, and one history record.
#include <gtest/gtest.h>

#include <string>

#include "mcp_harness.h"

namespace pgwarden::mcp::test {
namespace {

const char* const kReadOnly = "  agents:\n    guards:\n      - kind: read_only\n";

using McpServerTest = McpHarness;

TEST_F(McpServerTest, ToolsCallDispatchesByName) {
  start(kReadOnly);
  const std::string id = openSession();

  const Json listed = post(Json{{"jsonrpc", "2.0"}, {"id", 7}, {"method", "tools/list"}}, id).body;
  std::vector<std::string> names;
  for (const auto& t : listed["result"]["tools"]) names.push_back(t["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"query", "explain", "policy", "list_schemas",
                                             "list_tables", "describe_table", "search"}));

  // policy answers from the group, without a server.
  const Json policy = call(id, "policy", Json::object());
  ASSERT_TRUE(policy.contains("result")) << policy.dump();
  EXPECT_FALSE(policy["result"]["isError"].get<bool>());
  ASSERT_TRUE(policy["result"].contains("structuredContent")) << policy.dump();
  const Json& p = policy["result"]["structuredContent"];
  EXPECT_EQ(p["user"], "agent");
  EXPECT_EQ(p["group"], "agents");
  ASSERT_EQ(p["guards"].size(), 1u);
  EXPECT_EQ(p["guards"][0]["guard"], "read_only");
  EXPECT_EQ(p["limits"]["max_rows_per_call"], 100);

  // A tool nobody configured, and a transaction tool of a group that does not write.
  for (const char* name : {"drop_everything", "begin"}) {
    const Json r = call(id, name, Json::object());
    ASSERT_TRUE(r.contains("error")) << r.dump();
    EXPECT_EQ(r["error"]["code"], -32602);
    EXPECT_EQ(r["error"]["message"], std::string("Unknown tool: ") + name);
  }
  EXPECT_EQ(host_->pool_asks, 0);
  EXPECT_TRUE(host_->records.empty());
}

TEST_F(McpServerTest, ArgumentsThatBreakTheSchemaAreAToolResult) {
  start(kReadOnly);
  const std::string id = openSession();
  struct Case {
    const char* tool;
    Json args;
    const char* says;  // part of the reason
  };
  const std::vector<Case> cases = {
      {"query", Json::object(), "sql"},
      {"query", Json{{"sql", 42}}, "sql"},
      {"query", Json{{"sql", "select 1"}, {"max_rows", 101}}, "max_rows"},
      {"query", Json{{"sql", "select 1"}, {"colour", "red"}}, "colour"},
      {"describe_table", Json::object(), "table"},
  };
  for (const Case& c : cases) {
    const Json r = call(id, c.tool, c.args);
    ASSERT_TRUE(r.contains("result")) << c.tool << " " << c.args.dump() << ": " << r.dump();
    const Json& res = r["result"];
    EXPECT_TRUE(res["isError"].get<bool>());
    ASSERT_TRUE(res.contains("structuredContent")) << res.dump();
    const Json& s = res["structuredContent"];
    ASSERT_TRUE(s.contains("code") && s.contains("message") && s.contains("next_step")) << s.dump();
    EXPECT_EQ(s["code"], "INVALID_ARGUMENTS");
    const std::string message = s["message"].get<std::string>();
    EXPECT_EQ(message.rfind(std::string("Invalid arguments for tool ") + c.tool + ": ", 0), 0u)
        << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
    EXPECT_EQ(s["next_step"],
              std::string("call ") + c.tool + " again with arguments that match its inputSchema");
    const std::string text = res["content"][0]["text"].get<std::string>();
    EXPECT_EQ(text.rfind("pgwarden did not run the call:", 0), 0u) << text;
  }
  // Nothing ran, so nothing is recorded and no connection was asked for.
  EXPECT_EQ(host_->pool_asks, 0);
  EXPECT_TRUE(host_->records.empty());

  // Before 2025-11-25 the same mistake is a JSON-RPC error.
  const std::string old = openSession("2025-06-18");
  const Json r = call(old, "query", Json::object(), "2025-06-18");
  ASSERT_TRUE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["error"]["code"], -32602);
  EXPECT_EQ(r["error"]["message"].get<std::string>().rfind("Invalid arguments for tool query: ", 0),
            0u);
}

TEST_F(McpServerTest, ADenialIsRenderedAsPgwardensOwnWords) {
  start(kReadOnly);
  const std::string id = openSession();
  const Json r = call(id, "query", Json{{"sql", "DROP TABLE accounts"}});
  ASSERT_TRUE(r.contains("result")) << r.dump();
  const Json& res = r["result"];
  EXPECT_TRUE(res["isError"].get<bool>());
  ASSERT_TRUE(res.contains("structuredContent")) << res.dump();
  const Json& d = res["structuredContent"];
  for (const char* key : {"denied", "code", "sqlstate", "message", "next_step"}) {
    ASSERT_TRUE(d.contains(key)) << key << " missing: " << d.dump();
  }
  EXPECT_EQ(d["denied"], true);
  EXPECT_EQ(d["code"], "READ_ONLY");
  EXPECT_EQ(d["sqlstate"], "42501");
  ASSERT_TRUE(d["message"].is_string());
  ASSERT_TRUE(d["next_step"].is_string()) << d.dump();
  EXPECT_FALSE(d["next_step"].get<std::string>().empty());
  // The text leads with the refusal and carries the code and next step unfenced: they are
  // pgwarden's words, not data from the database.
  const std::string text = res["content"][0]["text"].get<std::string>();
  EXPECT_EQ(text.rfind("pgwarden refused the statement:\n", 0), 0u) << text;
  EXPECT_NE(text.find("READ_ONLY"), std::string::npos) << text;
  EXPECT_NE(text.find("next_step"), std::string::npos) << text;
  EXPECT_EQ(text.find("<untrusted-data>"), std::string::npos) << text;

  // Refused before it reached a server, and recorded once.
  EXPECT_EQ(host_->pool_asks, 0);
  ASSERT_EQ(host_->records.size(), 1u);
  EXPECT_EQ(host_->records[0].outcome, history::Outcome::kDenied);
  EXPECT_EQ(host_->records[0].sql_text, "DROP TABLE accounts");
  EXPECT_NE(host_->records[0].tool_name.find("query"), std::string::npos);
  EXPECT_EQ(host_->records[0].deny_code, "READ_ONLY");
}

}  // namespace
}  // namespace pgwarden::mcp::test
