// The issuer's JWKS fetched from its URL (mcp.oauth.jwks_url) off the event loop: a thread of its
// own fetches with libcurl at start, every refresh interval, and soon after a token names a kid
// the set lacks (a key rotation; at most once per kMinGap), and keeps the last good set. The loop
// only takes the current set under a mutex held for a pointer copy, never during a fetch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace pgwarden::mcp {

class JwkSet;

class JwksFetcher {
 public:
  static constexpr std::chrono::seconds kMinGap{10};
  static constexpr std::chrono::seconds kTimeout{10};

  JwksFetcher(std::string url, std::chrono::milliseconds refresh);
  ~JwksFetcher();  // stops the thread (a fetch under way is aborted) and joins it
  JwksFetcher(const JwksFetcher&) = delete;
  JwksFetcher& operator=(const JwksFetcher&) = delete;

  void start();
  // The last set fetched and read well; null until the first.
  std::shared_ptr<const JwkSet> keys() const;
  // A token named a kid the set lacks: fetch again soon (not sooner than kMinGap after the last).
  void refreshSoon();
  const std::string& url() const { return url_; }

 private:
  void run();
  void fetchOnce();
  static int onProgress(void* self, long long, long long, long long, long long);

  const std::string url_;
  const std::chrono::milliseconds refresh_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::shared_ptr<const JwkSet> keys_;
  bool stop_ = false;
  bool soon_ = false;
  std::thread thread_;
};

}  // namespace pgwarden::mcp
