#include "mcp/jwks_fetcher.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include "mcp/oauth_token.h"

namespace pgwarden::mcp {

namespace {

constexpr size_t kMaxJwksBytes = 1024 * 1024;

struct Body {
  std::string text;
  bool too_big = false;
};

size_t onData(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<Body*>(user);
  const size_t n = size * count;
  if (body->text.size() + n > kMaxJwksBytes) {
    body->too_big = true;
    return 0;  // ends the transfer
  }
  body->text.append(data, n);
  return n;
}

}  // namespace

JwksFetcher::JwksFetcher(std::string url, std::chrono::milliseconds refresh)
    : url_(std::move(url)), refresh_(refresh) {}

JwksFetcher::~JwksFetcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JwksFetcher::start() {
  thread_ = std::thread([this] { run(); });
}

std::shared_ptr<const JwkSet> JwksFetcher::keys() const {
  std::lock_guard lock(mu_);
  return keys_;
}

void JwksFetcher::refreshSoon() {
  {
    std::lock_guard lock(mu_);
    soon_ = true;
  }
  wake_.notify_all();
}

int JwksFetcher::onProgress(void* self, long long, long long, long long, long long) {
  auto* f = static_cast<JwksFetcher*>(self);
  std::lock_guard lock(f->mu_);
  return f->stop_ ? 1 : 0;  // non-zero aborts the transfer
}

void JwksFetcher::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    soon_ = false;
    lock.unlock();
    fetchOnce();
    lock.lock();
    // A kid asked for early waits out kMinGap first, so a stream of unknown kids fetches at
    // most once per gap.
    const auto fetched = std::chrono::steady_clock::now();
    wake_.wait_until(lock, fetched + refresh_, [this] { return stop_ || soon_; });
    if (!stop_ && soon_) wake_.wait_until(lock, fetched + kMinGap, [this] { return stop_; });
  }
}

void JwksFetcher::fetchOnce() {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return;
  Body body;
  curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(kTimeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &onData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &JwksFetcher::onProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, this);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  if (rc == CURLE_ABORTED_BY_CALLBACK) return;  // stopping
  if (rc != CURLE_OK || status != 200) {
    const std::string why = body.too_big     ? std::string("more than 1MiB")
                            : rc != CURLE_OK ? std::string(curl_easy_strerror(rc))
                                             : "HTTP " + std::to_string(status);
    spdlog::warn("mcp: could not fetch the OAuth issuer's keys from {}: {}; keeping {}", url_, why,
                 keys() ? "the keys fetched before" : "no keys: access tokens are refused");
    return;
  }
  auto set = JwkSet::parse(body.text);
  if (!set) {
    spdlog::warn("mcp: the OAuth issuer's key set at {} {}; keeping {}", url_, set.error(),
                 keys() ? "the keys fetched before" : "no keys: access tokens are refused");
    return;
  }
  spdlog::info("mcp: fetched {} OAuth signing key(s) from {}", (*set)->size(), url_);
  std::lock_guard lock(mu_);
  keys_ = std::move(*set);
}

}  // namespace pgwarden::mcp
