// libFuzzer target: the MCP endpoint's JSON-RPC layer, as the server calls it on a POST body:
// parseRpcBody with and without batches, then, for every tools/call, the tool lookup and the
// argument checks against the tool's input schema. Every message or error it returns must be
// well formed, and nothing may throw.
#include "mcp/jsonrpc.h"
#include "mcp/tools.h"
#include "tests/fuzz/fuzz_util.h"

namespace mcp = pgwarden::mcp;
using pgwarden::fuzz::Input;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const bool allow_batch = in.flag();
  const std::string_view body = in.rest();
  const mcp::RpcParse p = mcp::parseRpcBody(body, allow_batch);
  // Both may be empty: a notification with bad params is dropped unanswered, as JSON-RPC says.
  PGW_FUZZ_CHECK(allow_batch || !p.batch || p.messages.empty());
  for (const auto& e : p.errors) {
    PGW_FUZZ_CHECK(e.is_object() && e["jsonrpc"] == "2.0" && e.contains("id"));
    const int code = e["error"]["code"].get<int>();
    PGW_FUZZ_CHECK(code == mcp::kParseError || code == mcp::kInvalidRequest || code == mcp::kInvalidParams);
    (void)mcp::dumpJson(e);
  }
  for (const auto& m : p.messages) {
    PGW_FUZZ_CHECK(m.params.is_null() || m.params.is_object());
    if (m.kind != mcp::RpcMessage::Kind::kNotification) {
      PGW_FUZZ_CHECK(m.id.is_string() || m.id.is_number_integer() || m.id.is_number_unsigned());
    }
    if (m.method != "tools/call" || !m.params.is_object()) continue;
    const auto name = m.params.find("name");
    if (name == m.params.end() || !name->is_string()) continue;
    const auto tool = mcp::toolByName(name->get<std::string>());
    if (!tool) continue;
    const mcp::Json args = m.params.contains("arguments") ? m.params["arguments"] : mcp::Json(nullptr);
    (void)mcp::checkArguments(*tool, args, 1000);
  }
  return 0;
}
