#include "mcp/jsonrpc.h"

namespace pgwarden::mcp {

bool jsonDepthWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

Json rpcResult(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json rpcError(const Json& id, int code, std::string_view message, const Json& data) {
  Json err{{"code", code}, {"message", std::string(message)}};
  if (!data.is_null()) err["data"] = data;
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(err)}};
}

std::string dumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

bool validId(const Json& id) { return id.is_string() || id.is_number_integer() || id.is_number_unsigned(); }

// One element of the body: a message, or the error that answers it.
void parseOne(const Json& j, RpcParse& out) {
  if (!j.is_object()) {
    out.errors.push_back(rpcError(nullptr, kInvalidRequest, "Invalid Request: a message must be a JSON object"));
    return;
  }
  const auto idIt = j.find("id");
  const Json id = (idIt != j.end() && validId(*idIt)) ? *idIt : Json(nullptr);
  const auto v = j.find("jsonrpc");
  if (v == j.end() || !v->is_string() || *v != "2.0") {
    out.errors.push_back(rpcError(id, kInvalidRequest, "Invalid Request: \"jsonrpc\" must be \"2.0\""));
    return;
  }
  const auto m = j.find("method");
  if (m == j.end()) {
    // A client's response to a request of ours (pgwarden sends none, so it is only acknowledged).
    if (idIt != j.end() && validId(*idIt) && (j.contains("result") != j.contains("error"))) {
      RpcMessage msg;
      msg.kind = RpcMessage::Kind::kResponse;
      msg.id = *idIt;
      out.messages.push_back(std::move(msg));
      return;
    }
    out.errors.push_back(rpcError(id, kInvalidRequest, "Invalid Request: no \"method\""));
    return;
  }
  if (!m->is_string() || m->get_ref<const std::string&>().empty()) {
    out.errors.push_back(rpcError(id, kInvalidRequest, "Invalid Request: \"method\" must be a non-empty string"));
    return;
  }
  RpcMessage msg;
  msg.method = m->get<std::string>();
  if (idIt == j.end()) {
    msg.kind = RpcMessage::Kind::kNotification;
  } else if (!validId(*idIt)) {
    out.errors.push_back(rpcError(nullptr, kInvalidRequest, "Invalid Request: \"id\" must be a string or an integer"));
    return;
  } else {
    msg.kind = RpcMessage::Kind::kRequest;
    msg.id = *idIt;
  }
  if (const auto p = j.find("params"); p != j.end()) {
    if (!p->is_object()) {
      // MCP's params are always named (an object).
      if (msg.kind == RpcMessage::Kind::kRequest) {
        out.errors.push_back(rpcError(msg.id, kInvalidParams, "Invalid params: \"params\" must be an object"));
      }
      return;
    }
    msg.params = *p;
  }
  out.messages.push_back(std::move(msg));
}

}  // namespace

RpcParse parseRpcBody(std::string_view body, bool allow_batch) {
  RpcParse out;
  if (!jsonDepthWithin(body, kMaxJsonDepth)) {
    out.errors.push_back(rpcError(nullptr, kParseError, "Parse error: nested too deeply"));
    return out;
  }
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    out.errors.push_back(rpcError(nullptr, kParseError, "Parse error: the body is not valid JSON"));
    return out;
  }
  if (j.is_array()) {
    out.batch = true;
    if (!allow_batch) {
      out.errors.push_back(rpcError(nullptr, kInvalidRequest,
                                    "Invalid Request: batches are not part of this protocol version"));
      return out;
    }
    if (j.empty()) {
      out.errors.push_back(rpcError(nullptr, kInvalidRequest, "Invalid Request: empty batch"));
      return out;
    }
    for (const auto& e : j) parseOne(e, out);
    return out;
  }
  parseOne(j, out);
  return out;
}

}  // namespace pgwarden::mcp
