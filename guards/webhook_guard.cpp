// The http_webhook guard (config, request document, answer reading) and the registry of every
// guard kind (budgets/guard_kinds.h puts it in the registry with the others).
#include "guards/webhook_guard.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cstdlib>
#include <optional>

#include "common/log_text.h"
#include "common/config_util.h"
#include "guards/agent_context.h"
#include "guards/lua_guard.h"

namespace pgwarden::guards {

namespace {

constexpr size_t kMaxReasonBytes = 2000;
constexpr size_t kMaxDetailBytes = 8000;

const char* statusName(WebhookOutcome::Status s) {
  switch (s) {
    case WebhookOutcome::Status::kOk: return "ok";
    case WebhookOutcome::Status::kTimeout: return "timeout";
    case WebhookOutcome::Status::kTransport: return "transport error";
    case WebhookOutcome::Status::kHttpError: return "http error";
    case WebhookOutcome::Status::kOverloaded: return "too many requests in flight";
    case WebhookOutcome::Status::kCancelled: return "cancelled";
  }
  return "?";
}

bool validCode(const std::string& code) {
  if (code.empty() || code.size() > 64 || !std::isupper(static_cast<unsigned char>(code[0]))) return false;
  for (char c : code) {
    if (!std::isupper(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

std::string cut(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s;
}

bool validHeaderName(const std::string& n) {
  if (n.empty()) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace

GuardResult WebhookGuard::checkText(const GuardInput& in) const {
  // A driver's own session set-up (SET, BEGIN, SHOW, DISCARD ...) is not the service's to judge:
  // with the service down, fail_behavior: deny would otherwise stop clients from connecting. The
  // built-in guards still judge it (protected settings, READ WRITE).
  if (isSessionHousekeeping(in.analysis)) return {};
  GuardResult r;
  r.wants_webhook = true;
  r.webhook_body = contextJson(buildContextDoc(in));
  return r;
}

std::string WebhookGuard::urlForLog() const {
  std::string u = opts_.url;
  const size_t scheme = u.find("://");
  const size_t at = u.find('@', scheme == std::string::npos ? 0 : scheme + 3);
  const size_t slash = u.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (scheme != std::string::npos && at != std::string::npos && (slash == std::string::npos || at < slash)) {
    u.erase(scheme + 3, at - scheme - 2);
  }
  const size_t q = u.find('?');
  if (q != std::string::npos) u.resize(q);  // query strings carry tokens too
  return u;
}

GuardResult WebhookGuard::unavailable(const std::string& log_reason, const WebhookOutcome& outcome) const {
  spdlog::warn("http_webhook {}: {} ({} attempt{}); fail_behavior={}", urlForLog(),
               logsafe(log_reason, kLogMessageMaxBytes), outcome.attempts,
               outcome.attempts == 1 ? "" : "s", opts_.fail_open ? "allow" : "deny");
  if (opts_.fail_open) return {};
  GuardResult r;
  r.action = Action::kDeny;
  r.code = std::string(webhook_codes::kPolicyUnavailable);
  r.sqlstate = "58000";
  r.message =
      "A policy check is unavailable right now, so this statement was not run. Retry it in a minute, "
      "or stop and say that the policy check could not be completed.";
  r.facts.add("next_step", "retry later or stop");
  return r;
}

namespace {

// The fields of a service's answer, or why it cannot be read.
struct Answer {
  const char* problem = nullptr;  // set: unreadable, for the log
  std::optional<std::string> action, code, reason, hint, detail;
};

Answer readAnswer(const std::string& body) {
  Answer a;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    a.problem = "the answer is not a JSON object";
    return a;
  }
  auto str = [&](const char* key, bool& bad) -> std::optional<std::string> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    bad = true;
    return std::nullopt;
  };
  bool bad = false;
  a.action = str("action", bad);
  a.code = str("code", bad);
  a.reason = str("reason", bad);
  a.hint = str("hint", bad);
  if (auto it = j.find("detail"); it != j.end() && !it->is_null()) {
    a.detail = it->is_string() ? it->get<std::string>() : it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (bad) {
    a.problem = "a field of the answer is not a string";
  } else if (!a.action || (*a.action != "allow" && *a.action != "deny" && *a.action != "warn")) {
    a.problem = "the answer has no action allow, deny or warn";
  } else if (a.code && !validCode(*a.code)) {
    a.problem = "the answer's code is not UPPER_CASE";
  }
  return a;
}

}  // namespace

GuardObserver::CallResult webhookCallResult(const WebhookOutcome& o) {
  using R = GuardObserver::CallResult;
  switch (o.status) {
    case WebhookOutcome::Status::kOk: return readAnswer(o.body).problem ? R::kFailure : R::kOk;
    case WebhookOutcome::Status::kTimeout: return R::kTimeout;
    case WebhookOutcome::Status::kTransport:
    case WebhookOutcome::Status::kHttpError:
    case WebhookOutcome::Status::kOverloaded:
    case WebhookOutcome::Status::kCancelled: return R::kFailure;
  }
  return R::kFailure;
}

GuardResult WebhookGuard::checkWebhookAnswer(const WebhookOutcome& o) const {
  if (o.status != WebhookOutcome::Status::kOk) {
    std::string why = statusName(o.status);
    if (o.http_status) why += " (HTTP " + std::to_string(o.http_status) + ")";
    if (!o.error.empty()) why += ": " + o.error;
    return unavailable(why, o);
  }
  const Answer a = readAnswer(o.body);
  if (a.problem) return unavailable(a.problem, o);
  if (*a.action == "allow") return {};
  GuardResult r;
  r.action = *a.action == "deny" ? Action::kDeny : Action::kWarn;
  r.code = a.code ? *a.code
                  : std::string(r.action == Action::kDeny ? webhook_codes::kPolicyDenied : webhook_codes::kPolicyWarning);
  r.message = a.reason ? cut(*a.reason, kMaxReasonBytes)
                       : (r.action == Action::kDeny ? "This statement is not allowed by the policy service."
                                                    : "The policy service flagged this statement.");
  if (a.detail) r.facts.add("detail", cut(*a.detail, kMaxDetailBytes));
  if (a.hint) r.hint = cut(*a.hint, kMaxReasonBytes);
  return r;
}

std::unique_ptr<Guard> makeWebhookGuard(const YAML::Node& node, const std::string& path, const GroupSettings&) {
  checkGuardKeys(node, path, {"url", "timeout_ms", "retries", "headers", "fail_behavior", "max_response_bytes"});
  WebhookOptions o;
  const auto url = config::getOptionalString(node, path, "url");
  if (!url || url->empty()) config::fail(node, path + ".url", "an http_webhook guard needs a url");
  if (url->rfind("http://", 0) != 0 && url->rfind("https://", 0) != 0) {
    config::fail(node["url"], path + ".url", "the url must start with http:// or https://");
  }
  o.url = *url;
  o.timeout = std::chrono::milliseconds(config::getInt(node, path, "timeout_ms", 1000, 1, 600000));
  o.retries = static_cast<int>(config::getInt(node, path, "retries", 1, 0, 10));
  o.max_response_bytes = static_cast<size_t>(config::getSize(node, path, "max_response_bytes", 64u << 10));
  const std::string fb = config::getString(node, path, "fail_behavior", "deny");
  if (fb != "deny" && fb != "allow") {
    config::fail(node["fail_behavior"], path + ".fail_behavior", "expected deny or allow, got '" + fb + "'");
  }
  o.fail_open = fb == "allow";
  const YAML::Node headers = node["headers"];
  if (headers.IsDefined() && !headers.IsNull()) {
    config::requireMap(headers, path + ".headers");
    for (const auto& kv : headers) {
      const std::string name = kv.first.as<std::string>();
      const std::string key = path + ".headers." + name;
      if (!validHeaderName(name)) config::fail(kv.first, key, "not a valid header name");
      if (!kv.second.IsScalar()) config::fail(kv.second, key, "expected a value, env:NAME or file:/path");
      const std::string spec = kv.second.as<std::string>();
      std::string value;
      if (spec.rfind("env:", 0) == 0) {
        const char* v = std::getenv(spec.c_str() + 4);
        if (!v) config::fail(kv.second, key, "environment variable " + spec.substr(4) + " is not set");
        value = v;
      } else if (spec.rfind("file:", 0) == 0) {
        value = config::readSecretFile(kv.second, key, spec.substr(5));
      } else {
        value = spec;
      }
      if (value.find_first_of("\r\n") != std::string::npos) config::fail(kv.second, key, "a header value cannot span lines");
      o.headers.emplace_back(name, std::move(value));
    }
  }
  return std::make_unique<WebhookGuard>(std::move(o));
}

}  // namespace pgwarden::guards
