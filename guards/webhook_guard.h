// `kind: http_webhook`: the chain pauses while the daemon POSTs the ctx document (the same one
// Lua scripts see) to an operator's policy service, and the service's answer
// {action, code, reason, detail, hint} becomes this guard's verdict. The guard only builds the
// request and reads the answer; the HTTP exchange is the daemon's (daemon/webhook_client.h).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "guards/guard.h"

namespace pgwarden::guards {

namespace webhook_codes {
inline constexpr std::string_view kPolicyDenied = "POLICY_DENIED";       // a deny without a code
inline constexpr std::string_view kPolicyWarning = "POLICY_WARNING";     // a warn without a code
inline constexpr std::string_view kPolicyUnavailable = "POLICY_UNAVAILABLE";
}  // namespace webhook_codes

struct WebhookOptions {
  std::string url;
  std::chrono::milliseconds timeout{1000};  // whole exchange, retries included
  int retries = 1;                          // extra attempts on transport errors and 5xx
  // Header name and resolved value. Values may be secrets (env:NAME, file:/path): never logged.
  std::vector<std::pair<std::string, std::string>> headers;
  bool fail_open = false;                   // fail_behavior: allow
  size_t max_response_bytes = 64u << 10;
};

class WebhookGuard final : public Guard {
 public:
  explicit WebhookGuard(WebhookOptions opts) : opts_(std::move(opts)) {}
  std::string_view kind() const override { return "http_webhook"; }
  std::vector<std::string_view> codes() const override { return {"*"}; }
  // Asks the chain to pause with the ctx document as the request body; a text of session
  // housekeeping only (isSessionHousekeeping) passes without a call.
  GuardResult checkText(const GuardInput& in) const override;
  // Reads the service's answer; failures apply fail_behavior with a reason that names nothing
  // internal (no URL, no transport error, no header).
  GuardResult checkWebhookAnswer(const WebhookOutcome& outcome) const override;

  const WebhookOptions& options() const { return opts_; }
  // The URL with any user:password removed, for logs.
  std::string urlForLog() const;

 private:
  GuardResult unavailable(const std::string& log_reason, const WebhookOutcome& outcome) const;
  WebhookOptions opts_;
};

// How a call went, for the metrics: a timeout, a failure (transport error, HTTP error after the
// retries, overload, an answer that cannot be read), or ok. Reads the body again: it is small,
// and the metrics must not depend on which guard the answer was for.
GuardObserver::CallResult webhookCallResult(const WebhookOutcome& outcome);

std::unique_ptr<Guard> makeWebhookGuard(const YAML::Node& node, const std::string& path, const GroupSettings& group);

}  // namespace pgwarden::guards
