// `pgwarden mcp-stdio`: an MCP server on stdin/stdout (newline-delimited JSON-RPC, the stdio
// transport) that forwards each message to a pgwarden MCP endpoint over Streamable HTTP with a
// bearer token read from a file, for clients whose configuration takes only local commands
// (Claude Desktop). Both eras pass through: a 2025 client's initialize gets a session whose id
// and version go with every later message; a 2026-07-28 request gets its MCP-Protocol-Version,
// Mcp-Method and Mcp-Name headers mirrored from its body. A blocking client in its own process:
// nothing here runs on the daemon's loop.
#include <curl/curl.h>
#include <openssl/evp.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/cli.h"

namespace pgwarden::daemon {

namespace {

using Json = nlohmann::json;

constexpr long kTimeoutSeconds = 600;  // a statement may run long; pgwarden bounds it anyway

struct Reply {
  long status = 0;
  std::string content_type;
  std::string session_id;
  std::string body;
};

size_t onBody(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Reply*>(user);
  if (r->body.size() > (64u << 20)) return 0;  // far past mcp.max_result_bytes: give up
  r->body.append(data, size * n);
  return size * n;
}

size_t onHeader(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Reply*>(user);
  std::string line(data, size * n);
  const auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
      value.pop_back();
    if (name == "mcp-session-id") r->session_id = value;
    if (name == "content-type") r->content_type = value;
  }
  return size * n;
}

// A header value as the 2026-07-28 transport carries it: plain when it is visible ASCII without
// surrounding spaces, else the =?base64?...?= sentinel.
std::string headerValue(const std::string& v) {
  bool plain = !v.empty() && v.front() != ' ' && v.back() != ' ' && v.rfind("=?base64?", 0) != 0;
  for (unsigned char c : v) plain = plain && c >= 0x20 && c <= 0x7e;
  if (plain) return v;
  std::string out(4 * ((v.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(v.data()), static_cast<int>(v.size()));
  out.resize(static_cast<size_t>(n));
  return "=?base64?" + out + "?=";
}

class Bridge {
 public:
  Bridge(std::string url, std::string token) : url_(std::move(url)), token_(std::move(token)) {}

  // Forwards one message; what the endpoint answered, as lines for stdout.
  void forward(const std::string& line, std::ostream& out) {
    const Json msg = Json::parse(line, nullptr, false);
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json, text/event-stream");
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token_).c_str());
    std::string version = version_;
    if (msg.is_object() && msg.contains("params") && msg["params"].is_object()) {
      const Json& params = msg["params"];
      const auto meta = params.find("_meta");
      if (meta != params.end() && meta->is_object()) {
        const auto v = meta->find("io.modelcontextprotocol/protocolVersion");
        if (v != meta->end() && v->is_string()) version = v->get<std::string>();
      }
      if (version >= "2026-07-28" && params.contains("name") && params["name"].is_string()) {
        headers = curl_slist_append(
            headers, ("Mcp-Name: " + headerValue(params["name"].get<std::string>())).c_str());
      }
    }
    const bool modern = version >= "2026-07-28";
    if (modern && msg.is_object() && msg.contains("method") && msg["method"].is_string()) {
      headers = curl_slist_append(
          headers, ("Mcp-Method: " + headerValue(msg["method"].get<std::string>())).c_str());
    }
    if (!version.empty())
      headers = curl_slist_append(headers, ("MCP-Protocol-Version: " + version).c_str());
    if (!modern && !session_.empty())
      headers = curl_slist_append(headers, ("Mcp-Session-Id: " + session_).c_str());
    Reply r;
    CURL* c = curl_easy_init();
    CURLcode rc = CURLE_FAILED_INIT;
    if (c) {
      curl_easy_setopt(c, CURLOPT_URL, url_.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, line.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(line.size()));
      curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &onBody);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
      curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &onHeader);
      curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
      curl_easy_setopt(c, CURLOPT_TIMEOUT, kTimeoutSeconds);
      curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
      rc = curl_easy_perform(c);
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
      curl_easy_cleanup(c);
    }
    curl_slist_free_all(headers);
    const bool request = msg.is_object() && msg.contains("id") && msg.contains("method");
    if (rc != CURLE_OK) {
      if (request)
        fail(out, msg["id"], std::string("pgwarden is not reachable: ") + curl_easy_strerror(rc));
      return;
    }
    if (!r.session_id.empty()) session_ = r.session_id;
    if (r.status == 202 || r.body.empty()) {
      if (request)
        fail(out, msg["id"],
             "pgwarden answered HTTP " + std::to_string(r.status) + " without a body");
      return;
    }
    if (r.content_type.rfind("text/event-stream", 0) == 0) {
      // One event per message: its data lines joined.
      std::string data;
      size_t at = 0;
      while (at < r.body.size()) {
        size_t end = r.body.find('\n', at);
        if (end == std::string::npos) end = r.body.size();
        std::string l = r.body.substr(at, end - at);
        if (!l.empty() && l.back() == '\r') l.pop_back();
        if (l.rfind("data:", 0) == 0) {
          data += l.substr(l.size() > 5 && l[5] == ' ' ? 6 : 5);
        } else if (l.empty() && !data.empty()) {
          emit(out, data);
          data.clear();
        }
        at = end + 1;
      }
      if (!data.empty()) emit(out, data);
      return;
    }
    const Json body = Json::parse(r.body, nullptr, false);
    if (body.is_discarded()) {
      if (request)
        fail(out, msg["id"],
             "pgwarden answered HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 200));
      return;
    }
    emit(out, r.body);
  }

  // A 2025 session ends with the client (DELETE), so its transaction does not wait for the
  // idle timeout.
  void close() {
    if (session_.empty()) return;
    CURL* c = curl_easy_init();
    if (!c) return;
    curl_slist* headers = curl_slist_append(nullptr, ("Authorization: Bearer " + token_).c_str());
    headers = curl_slist_append(headers, ("Mcp-Session-Id: " + session_).c_str());
    curl_easy_setopt(c, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(
        c, CURLOPT_WRITEFUNCTION, +[](char*, size_t s, size_t n, void*) { return s * n; });
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_perform(c);
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
  }

 private:
  void emit(std::ostream& out, const std::string& json) {
    const Json j = Json::parse(json, nullptr, false);
    if (j.is_object() && j.contains("result") && j["result"].is_object() &&
        j["result"].contains("protocolVersion") && j["result"]["protocolVersion"].is_string()) {
      version_ = j["result"]["protocolVersion"].get<std::string>();  // initialize's answer
    }
    out << (j.is_discarded() ? json : j.dump(-1, ' ', false, Json::error_handler_t::replace))
        << '\n'
        << std::flush;
  }
  void fail(std::ostream& out, const Json& id, const std::string& message) {
    emit(out,
         Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", -32603}, {"message", message}}}}
             .dump());
  }

  std::string url_;
  std::string token_;
  std::string session_;
  std::string version_;
};

}  // namespace

int mcpStdioCommand(const std::string& url, const std::string& token_file, std::istream& in,
                    std::ostream& out, std::ostream& err) {
  std::ifstream f(token_file);
  std::string token;
  if (!f || !std::getline(f, token)) {
    err << "pgwarden mcp-stdio: cannot read the token from " << token_file << "\n";
    return kExitFailure;
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ' || token.back() == '\t'))
    token.pop_back();
  if (token.empty()) {
    err << "pgwarden mcp-stdio: " << token_file
        << " holds no token (make one with `pgwarden token USER`)\n";
    return kExitFailure;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    err << "pgwarden mcp-stdio: libcurl did not start\n";
    return kExitFailure;
  }
  Bridge bridge(url, token);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    bridge.forward(line, out);
  }
  bridge.close();
  curl_global_cleanup();
  return kExitOk;
}

}  // namespace pgwarden::daemon
