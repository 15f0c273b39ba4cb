// Per-conversation budgets: the `budget` guard kind (limits from config) and the BudgetLedger the
// daemon holds, one per loop, with the counters keyed by (authenticated user, conversation_id),
// never by the conversation alone. A statement counts once, when it has passed the whole chain.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "guards/guard.h"

namespace pgwarden::budgets {

namespace budget_codes {
inline constexpr std::string_view kBudgetExhausted = "BUDGET_EXHAUSTED";    // max_statements
inline constexpr std::string_view kDeniedExhausted = "DENIED_EXHAUSTED";    // max_denied
inline constexpr std::string_view kRowsExhausted = "ROWS_EXHAUSTED";        // max_rows
inline constexpr std::string_view kRateLimited = "RATE_LIMITED";            // per_user_rate
inline constexpr std::string_view kTooManyRunning = "TOO_MANY_RUNNING";     // per_user_concurrent
inline constexpr std::string_view kBudgetUnavailable = "BUDGET_UNAVAILABLE";  // shared store failed
inline constexpr std::string_view kSqlstateBudget = "54000";
inline constexpr std::string_view kSqlstateRate = "53400";
inline constexpr std::string_view kSqlstateUnavailable = "58000";
}  // namespace budget_codes

struct BudgetLimits {
  int64_t max_statements = 0;  // 0: no limit
  int64_t max_denied = 0;
  int64_t max_rows = 0;
  std::chrono::milliseconds window{0};  // counters restart after this; 0: the conversation's lifetime
  std::chrono::milliseconds idle_expiry{std::chrono::hours(1)};  // state dropped after this idle time
  double per_user_rate = 0;              // statements per minute (token bucket, burst = one minute)
  int64_t per_user_concurrent = 0;       // statements running at once
  std::string reason;                    // overrides the BUDGET_EXHAUSTED message ({max_statements}...)
  size_t max_conversations = 100000;     // the ledger's bound (largest over the config wins)
};

struct BudgetStoreConfig {
  bool shared = false;         // store: postgres
  std::string dsn;             // secret: never logged
  std::chrono::milliseconds timeout{500};
  bool fail_open = false;      // fail_behavior: allow
};

struct BudgetKey {
  std::string user;
  std::string conversation;
  // Length-prefixed, so no user name and conversation id can combine into another pair's id.
  std::string id() const { return std::to_string(user.size()) + ':' + user + conversation; }
};

class BudgetGuard final : public guards::Guard {
 public:
  BudgetGuard(BudgetLimits limits, BudgetStoreConfig store) : limits_(std::move(limits)), store_(std::move(store)) {}
  std::string_view kind() const override { return "budget"; }
  std::vector<std::string_view> codes() const override;
  // Read-only look at the ledger in ctx.budgets (none: pass). The authoritative check-and-count
  // is BudgetLedger::admit when the statement runs.
  guards::GuardResult checkText(const guards::GuardInput& in) const override;

  const BudgetLimits& limits() const { return limits_; }
  const BudgetStoreConfig& store() const { return store_; }

  // The verdicts, for the ledger.
  guards::GuardResult statementsExhausted(const guards::BudgetCounters& c,
                                          std::string_view conversation) const;
  // A text of `statements` statements that does not fit in what is left (each counts once).
  guards::GuardResult textOverBudget(const guards::BudgetCounters& c, int64_t statements) const;
  guards::GuardResult deniedExhausted(const guards::BudgetCounters& c) const;
  guards::GuardResult rowsExhausted(const guards::BudgetCounters& c) const;
  guards::GuardResult rateLimited(std::string_view user, double wait_seconds) const;
  guards::GuardResult tooManyRunning(int64_t running) const;
  guards::GuardResult unavailable() const;

 private:
  BudgetLimits limits_;
  BudgetStoreConfig store_;
};

// Whether a text spends budget: anything but session housekeeping (isSessionHousekeeping in
// guards/policy.h) does. SET/RESET/SHOW, transaction control, DISCARD/DEALLOCATE/CLOSE and empty
// texts are free, so a driver's own setup statements (JDBC sends two SETs on connect) neither
// count nor get refused.
bool countsAgainstBudget(const analysis::Analysis& analysis);
// How many statements of a text spend budget (a multi-statement Query counts each of its
// statements that is not housekeeping, once).
int64_t budgetStatements(const analysis::Analysis& analysis);

std::unique_ptr<guards::Guard> makeBudgetGuard(const YAML::Node& node, const std::string& path,
                                               const guards::GroupSettings& group);

// The group's budget guard and its chain position, or nullptr (a group has at most one).
const BudgetGuard* findBudgetGuard(const guards::PolicyGroup& group, size_t* index = nullptr);

// A table several pgwarden processes share (budgets/budget_store_pg.h). Calls come from the loop;
// answers arrive on the loop, never inside the call that asked.
class SharedBudgetStore {
 public:
  virtual ~SharedBudgetStore() = default;
  struct Answer {
    bool admitted = false;       // counted (within limits)
    guards::BudgetCounters counters;  // after the upsert (admitted) or as found (refused)
  };
  using AdmitDone = std::function<void(Result<Answer>)>;
  // Counts a text of `statements` statements if all of them fit within `limits`, atomically
  // (whole or not at all). Returns a ticket.
  virtual uint64_t admit(const BudgetKey& key, const BudgetLimits& limits, int64_t statements, AdmitDone done) = 0;
  // The answer for `ticket` is no longer wanted (its session ended); `done` will not be called.
  virtual void cancel(uint64_t ticket) = 0;
  virtual void addRows(const BudgetKey& key, const BudgetLimits& limits, int64_t rows) = 0;
  // `statements` statements of one text were denied by some guard (not a budget).
  virtual void addDenied(const BudgetKey& key, const BudgetLimits& limits, int64_t statements) = 0;
};

// What the admin view lists.
struct ConversationUsage {
  std::string user;
  std::string conversation;
  guards::BudgetCounters counters;
  int64_t window_started_ms = 0;  // ledger clock
  int64_t last_seen_ms = 0;
};
struct UserUsage {
  std::string user;
  double tokens = 0;     // rate bucket, when a rate applies
  int64_t running = 0;
};

// Budget state of one loop. Single-threaded like the loop; bounded (LRU over conversations,
// idle expiry); survives config reloads (limits are read from the guard on every call).
class BudgetLedger final : public guards::BudgetView {
 public:
  using Clock = std::function<int64_t()>;  // milliseconds, monotonic
  using StoreFactory = std::function<std::unique_ptr<SharedBudgetStore>(const BudgetStoreConfig&)>;
  explicit BudgetLedger(size_t max_conversations = 100000, Clock clock = {});
  ~BudgetLedger();
  BudgetLedger(const BudgetLedger&) = delete;
  BudgetLedger& operator=(const BudgetLedger&) = delete;

  // Shared stores are made on first use, one per DSN, by this factory (the daemon's libpq one).
  void setStoreFactory(StoreFactory f) { store_factory_ = std::move(f); }
  void setMaxConversations(size_t n);

  // The conversation a statement belongs to: (user, conversation_id), or (user, this session)
  // when the client named no conversation.
  BudgetKey keyFor(const guards::RequestContext& ctx) const;

  // Read only: the guard's verdict now (allow when within limits). Expired state counts as new.
  guards::GuardResult check(const BudgetGuard& g, const BudgetKey& key) const;
  // Counters as they stand (zero for an unknown conversation).
  guards::BudgetCounters counters(const BudgetKey& key) const;
  guards::BudgetCounters countersFor(const guards::RequestContext& ctx) const override {
    return counters(keyFor(ctx));
  }
  // The ledger behind a request's BudgetView: the daemon's and the tests' views are all ledgers.
  static const BudgetLedger& of(const guards::BudgetView& view) {
    return static_cast<const BudgetLedger&>(view);
  }

  // The statement passed the chain and is about to run: check again and count it, atomically.
  struct Admission {
    enum class Kind { kAdmitted, kDenied, kPending };
    Kind kind = Kind::kAdmitted;
    guards::GuardResult denial;  // kDenied
    uint64_t ticket = 0;  // kPending: `done` comes later unless cancel(ticket)
  };
  using AdmitDone = std::function<void(Admission)>;
  // Memory store: answers at once (done is not called). Shared store: kPending, then `done` on
  // the loop with kAdmitted or kDenied (fail_behavior applied when the store fails).
  // `statements`: how many statements the text counts as; the text is admitted whole or not at
  // all (a simple Query cannot be cut), by the memory ledger and the shared store alike.
  Admission admit(const BudgetGuard& g, const BudgetKey& key, AdmitDone done = {}, int64_t statements = 1);
  void cancel(uint64_t ticket);
  // Rows the client received for an admitted statement; a statement some guard (not a budget) denied.
  void addRows(const BudgetGuard& g, const BudgetKey& key, int64_t rows);
  // A denied text counts as `statements` denied statements (budgetStatements, at least 1).
  void addDenied(const BudgetGuard& g, const BudgetKey& key, int64_t statements = 1);
  // An admitted statement finished (its concurrency slot is free again).
  void release(const BudgetKey& key);

  // Drops idle conversations. Runs by itself at most every kSweepEveryMs as conversations are
  // touched, and whenever the metrics read size(); lookups expire lazily too.
  void sweep();
  static constexpr int64_t kSweepEveryMs = 10000;
  std::vector<ConversationUsage> conversations(size_t limit = SIZE_MAX) const;
  std::vector<UserUsage> users() const;
  size_t size() const {
    std::lock_guard lock(mu_);
    return lru_.size();
  }
  uint64_t evictions() const {
    std::lock_guard lock(mu_);
    return evictions_;
  }
  uint64_t storeFailures() const {
    std::lock_guard lock(mu_);
    return store_failures_;
  }
  // The shared stores this thread's loop made, closed on that loop before it ends.
  void releaseStoresOfThisThread();

 private:
  struct Entry {
    BudgetKey key;
    guards::BudgetCounters counters;
    int64_t window_start = 0;
    int64_t last_seen = 0;
    int64_t idle_ms = 0;     // idle expiry in force when last touched
  };
  struct User {
    double tokens = -1;      // -1: full (set on first use)
    int64_t refilled = 0;
    int64_t running = 0;
  };
  int64_t now() const;
  Entry* find(const std::string& id, const BudgetGuard* g);
  const Entry* peek(const std::string& id, const BudgetGuard& g) const;
  Entry& touch(const BudgetKey& key, const BudgetGuard& g);
  void refill(User& u, double per_minute) const;
  guards::GuardResult localCheck(const BudgetGuard& g, const BudgetKey& key,
                                 const guards::BudgetCounters& c) const;
  void countAdmitted(const BudgetGuard& g, const BudgetKey& key, int64_t statements = 1);
  SharedBudgetStore* storeFor(const BudgetStoreConfig& cfg);

  Clock clock_;
  size_t max_conversations_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::map<std::string, User, std::less<>> users_;
  uint64_t evictions_ = 0;
  int64_t last_sweep_ = 0;
  uint64_t store_failures_ = 0;
  uint64_t instance_ = 0;  // tells this process's session keys apart in a shared table
  StoreFactory store_factory_;
  using StoreKey = std::pair<std::thread::id, std::string>;
  std::map<StoreKey, std::unique_ptr<SharedBudgetStore>> stores_;
  // Every loop admits through the one ledger, so budgets stay exact across loops. Recursive: a
  // store that answers inside admit() runs the answer under the same lock.
  mutable std::recursive_mutex mu_;
  struct PendingAdmit {
    SharedBudgetStore* store = nullptr;
    uint64_t store_ticket = 0;
  };
  std::unordered_map<uint64_t, PendingAdmit> pending_;
  uint64_t next_ticket_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace pgwarden::budgets
