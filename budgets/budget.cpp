// The budget guard (config, verdict texts) and the BudgetLedger: conversation counters in a
// bounded LRU with window and idle expiry, per-user token buckets and running counts, and the
// hand-off to a shared store when several pgwarden processes must share one budget.
#include "budgets/budget.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/log_text.h"
#include "common/config_util.h"
#include "guards/policy.h"

namespace pgwarden::budgets {

namespace {

constexpr const char* kFinish = "Answer with what you have found and say what you could not determine.";

int64_t steadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// {name} placeholders from a small fixed set; unknown ones stay as written.
std::string fill(const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '{') {
      const size_t close = text.find('}', i + 1);
      if (close != std::string::npos) {
        auto it = values.find(text.substr(i + 1, close - i - 1));
        if (it != values.end()) {
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += text[i++];
  }
  return out;
}

guards::GuardResult denyWith(std::string_view code, std::string_view sqlstate,
                             std::string message) {
  guards::GuardResult r;
  r.action = guards::Action::kDeny;
  r.code = std::string(code);
  r.sqlstate = std::string(sqlstate);
  r.message = std::move(message);
  return r;
}

}  // namespace

// ---- the guard ----

std::vector<std::string_view> BudgetGuard::codes() const {
  return {budget_codes::kBudgetExhausted, budget_codes::kDeniedExhausted, budget_codes::kRowsExhausted,
          budget_codes::kRateLimited,     budget_codes::kTooManyRunning,  budget_codes::kBudgetUnavailable};
}

// The classification is the chain's (isSessionHousekeeping), shared with the Lua and webhook
// guards, so what a driver may send for free is the same everywhere.
bool countsAgainstBudget(const analysis::Analysis& analysis) {
  return !guards::isSessionHousekeeping(analysis);
}

int64_t budgetStatements(const analysis::Analysis& analysis) {
  return std::count_if(
      analysis.statements.begin(), analysis.statements.end(),
      [](const analysis::StatementInfo& st) { return !guards::isSessionHousekeeping(st.kind); });
}

guards::GuardResult BudgetGuard::checkText(const guards::GuardInput& in) const {
  if (!in.ctx.budgets || !countsAgainstBudget(in.analysis)) return {};
  const BudgetLedger& ledger = BudgetLedger::of(*in.ctx.budgets);
  return ledger.check(*this, ledger.keyFor(in.ctx));
}

guards::GuardResult BudgetGuard::statementsExhausted(const guards::BudgetCounters& c,
                                                     std::string_view conversation) const {
  const std::string n = std::to_string(limits_.max_statements);
  std::string message =
      limits_.reason.empty()
          ? "This conversation has used its budget of " + n + " queries. Do not run more. " + kFinish
          : fill(limits_.reason, {{"max_statements", n},
                                  {"statements", std::to_string(c.statements)},
                                  {"conversation_id", std::string(conversation)}});
  guards::GuardResult r =
      denyWith(budget_codes::kBudgetExhausted, budget_codes::kSqlstateBudget, std::move(message));
  r.facts.add("statements", c.statements)
      .add("max_statements", limits_.max_statements)
      .add("next_step", "stop querying and answer with what you have found");
  return r;
}

guards::GuardResult BudgetGuard::textOverBudget(const guards::BudgetCounters& c,
                                                int64_t statements) const {
  const int64_t left = std::max<int64_t>(0, limits_.max_statements - c.statements);
  std::string message = "This text has " + std::to_string(statements) + " statements, and this conversation has " +
                        std::to_string(left) + " of its budget of " + std::to_string(limits_.max_statements) +
                        " queries left. Send at most " + std::to_string(left) +
                        " statement(s), the ones that matter most, or stop and answer with what you have found.";
  guards::GuardResult r =
      denyWith(budget_codes::kBudgetExhausted, budget_codes::kSqlstateBudget, std::move(message));
  r.facts.add("statements", c.statements)
      .add("max_statements", limits_.max_statements)
      .add("statements_in_text", statements)
      .add("next_step", "send fewer statements, or stop and answer with what you have found");
  return r;
}

guards::GuardResult BudgetGuard::deniedExhausted(const guards::BudgetCounters& c) const {
  guards::GuardResult r =
      denyWith(budget_codes::kDeniedExhausted, budget_codes::kSqlstateBudget,
               "This conversation has had " + std::to_string(c.denied) +
                   " statements denied, its limit. Do not run more. " + kFinish);
  r.facts.add("denied", c.denied)
      .add("max_denied", limits_.max_denied)
      .add("next_step", "stop querying and answer with what you have found");
  return r;
}

guards::GuardResult BudgetGuard::rowsExhausted(const guards::BudgetCounters& c) const {
  guards::GuardResult r = denyWith(budget_codes::kRowsExhausted, budget_codes::kSqlstateBudget,
                                   "This conversation has received " + std::to_string(c.rows) +
                                       " rows, its budget of " + std::to_string(limits_.max_rows) +
                                       ". Do not run more queries. " + kFinish);
  r.facts.add("rows", c.rows)
      .add("max_rows", limits_.max_rows)
      .add("next_step", "stop querying and answer with what you have found");
  return r;
}

guards::GuardResult BudgetGuard::rateLimited(std::string_view user, double wait_seconds) const {
  const auto wait = static_cast<int64_t>(std::ceil(std::max(wait_seconds, 1.0)));
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%g", limits_.per_user_rate);
  guards::GuardResult r =
      denyWith(budget_codes::kRateLimited, budget_codes::kSqlstateRate,
               "User " + std::string(user) + " is over its rate of " + rate +
                   " statements per minute. Wait about " + std::to_string(wait) +
                   " seconds before sending the next statement.");
  r.facts.add("per_user_rate", limits_.per_user_rate)
      .add("retry_after_seconds", wait)
      .add("next_step", "wait, then send the statement again");
  return r;
}

guards::GuardResult BudgetGuard::tooManyRunning(int64_t running) const {
  guards::GuardResult r =
      denyWith(budget_codes::kTooManyRunning, budget_codes::kSqlstateRate,
               "You already have " + std::to_string(running) +
                   " statements running, the most allowed at once. Wait for one to finish, "
                   "then send this one again.");
  r.facts.add("running", running)
      .add("per_user_concurrent", limits_.per_user_concurrent)
      .add("next_step", "wait for a running statement to finish");
  return r;
}

guards::GuardResult BudgetGuard::unavailable() const {
  guards::GuardResult r =
      denyWith(budget_codes::kBudgetUnavailable, budget_codes::kSqlstateUnavailable,
               "The query budget could not be checked right now, so this statement was not run. "
               "Retry it in a little while, or stop and answer with what you have found.");
  r.facts.add("next_step", "retry later or stop");
  return r;
}

std::unique_ptr<guards::Guard> makeBudgetGuard(const YAML::Node& node, const std::string& path,
                                               const guards::GroupSettings&) {
  guards::checkGuardKeys(node, path,
                         {"max_statements", "max_denied", "max_rows", "window", "idle_expiry",
                          "per_user_rate", "per_user_concurrent", "reason", "max_conversations",
                          "store", "dsn", "dsn_file", "timeout", "fail_behavior"});
  BudgetLimits l;
  l.max_statements = config::getInt(node, path, "max_statements", 0, 0);
  l.max_denied = config::getInt(node, path, "max_denied", 0, 0);
  l.max_rows = config::getInt(node, path, "max_rows", 0, 0);
  l.window = config::getDuration(node, path, "window", std::chrono::milliseconds(0));
  l.idle_expiry = config::getDuration(node, path, "idle_expiry", std::chrono::hours(1));
  if (l.idle_expiry.count() <= 0) {
    config::fail(node["idle_expiry"], path + ".idle_expiry", "must be above zero (state must expire)");
  }
  l.per_user_rate = config::getDouble(node, path, "per_user_rate", 0);
  if (l.per_user_rate < 0) config::fail(node["per_user_rate"], path + ".per_user_rate", "must be zero or more");
  l.per_user_concurrent = config::getInt(node, path, "per_user_concurrent", 0, 0);
  l.reason = config::getString(node, path, "reason", "");
  l.max_conversations = static_cast<size_t>(config::getInt(node, path, "max_conversations", 100000, 1, 100000000));
  if (l.max_statements == 0 && l.max_denied == 0 && l.max_rows == 0 && l.per_user_rate == 0 &&
      l.per_user_concurrent == 0) {
    config::fail(node, path, "a budget needs at least one of max_statements, max_denied, max_rows, "
                             "per_user_rate, per_user_concurrent");
  }

  BudgetStoreConfig s;
  const std::string store = config::getString(node, path, "store", "memory");
  if (store != "memory" && store != "postgres") {
    config::fail(node["store"], path + ".store", "expected memory or postgres, got '" + store + "'");
  }
  s.shared = store == "postgres";
  const auto dsn = config::getOptionalString(node, path, "dsn");
  const auto dsn_file = config::getOptionalString(node, path, "dsn_file");
  if (dsn && dsn_file) config::fail(node["dsn_file"], path + ".dsn_file", "give dsn or dsn_file, not both");
  if (dsn) s.dsn = *dsn;
  if (dsn_file) s.dsn = config::readSecretFile(node["dsn_file"], path + ".dsn_file", *dsn_file);
  if (s.shared && s.dsn.empty()) config::fail(node["store"], path + ".dsn", "store: postgres needs dsn or dsn_file");
  if (!s.shared && (dsn || dsn_file)) {
    config::fail(dsn ? node["dsn"] : node["dsn_file"], path + (dsn ? ".dsn" : ".dsn_file"),
                 "dsn is only for store: postgres");
  }
  if (dsn || dsn_file) {
    config::requireConnectionString(dsn ? node["dsn"] : node["dsn_file"], path + (dsn ? ".dsn" : ".dsn_file"),
                                    s.dsn);
  }
  s.timeout = config::getDuration(node, path, "timeout", std::chrono::milliseconds(500));
  if (s.timeout.count() <= 0) config::fail(node["timeout"], path + ".timeout", "must be above zero");
  const std::string fb = config::getString(node, path, "fail_behavior", "deny");
  if (fb != "deny" && fb != "allow") {
    config::fail(node["fail_behavior"], path + ".fail_behavior", "expected deny or allow, got '" + fb + "'");
  }
  s.fail_open = fb == "allow";
  return std::make_unique<BudgetGuard>(std::move(l), std::move(s));
}

const BudgetGuard* findBudgetGuard(const guards::PolicyGroup& group, size_t* index) {
  const auto& guards = group.guards();
  for (size_t i = 0; i < guards.size(); ++i) {
    if (guards[i]->kind() == "budget") {
      if (index) *index = i;
      return static_cast<const BudgetGuard*>(guards[i].get());
    }
  }
  return nullptr;
}

// ---- the ledger ----

BudgetLedger::BudgetLedger(size_t max_conversations, Clock clock)
    : clock_(std::move(clock)), max_conversations_(std::max<size_t>(1, max_conversations)) {
  std::random_device rd;
  instance_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

BudgetLedger::~BudgetLedger() {
  std::lock_guard lock(mu_);
  *alive_ = false;
  for (auto& [ticket, p] : pending_) p.store->cancel(p.store_ticket);
}

void BudgetLedger::setMaxConversations(size_t n) {
  std::lock_guard lock(mu_);
  max_conversations_ = std::max<size_t>(1, n);
  while (lru_.size() > max_conversations_) {
    index_.erase(lru_.back().key.id());
    lru_.pop_back();
    ++evictions_;
  }
}

int64_t BudgetLedger::now() const { return clock_ ? clock_() : steadyMs(); }

BudgetKey BudgetLedger::keyFor(const guards::RequestContext& ctx) const {
  BudgetKey k;
  k.user = std::string(ctx.user);
  if (!ctx.conversation_id.empty()) {
    k.conversation = std::string(ctx.conversation_id);
  } else {
    // No conversation named: the session is the conversation. The instance part keeps two
    // processes' session 7 apart in a shared table; the leading '~' cannot come from a client
    // conversation_id that starts with a letter or digit, but even if it does it only names a
    // conversation of the same user.
    char buf[64];
    std::snprintf(buf, sizeof(buf), "~session:%016llx:%llu", static_cast<unsigned long long>(instance_),
                  static_cast<unsigned long long>(ctx.session_id));
    k.conversation = buf;
  }
  return k;
}

const BudgetLedger::Entry* BudgetLedger::peek(const std::string& id, const BudgetGuard& g) const {
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  const Entry& e = *it->second;
  const int64_t t = now();
  if (t - e.last_seen >= g.limits().idle_expiry.count()) return nullptr;
  if (g.limits().window.count() > 0 && t - e.window_start >= g.limits().window.count()) return nullptr;
  return &e;
}

BudgetLedger::Entry* BudgetLedger::find(const std::string& id, const BudgetGuard* g) {
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  Entry& e = *it->second;
  const int64_t t = now();
  const int64_t idle = g ? g->limits().idle_expiry.count() : e.idle_ms;
  if (t - e.last_seen >= idle) {
    lru_.erase(it->second);
    index_.erase(it);
    return nullptr;
  }
  if (g && g->limits().window.count() > 0 && t - e.window_start >= g->limits().window.count()) {
    e.counters = {};
    e.window_start = t;
  }
  return &e;
}

BudgetLedger::Entry& BudgetLedger::touch(const BudgetKey& key, const BudgetGuard& g) {
  const std::string id = key.id();
  const int64_t t = now();
  Entry* e = find(id, &g);
  if (e) {
    auto it = index_.find(id);
    lru_.splice(lru_.begin(), lru_, it->second);
  } else {
    while (lru_.size() >= max_conversations_) {
      index_.erase(lru_.back().key.id());
      lru_.pop_back();
      ++evictions_;
    }
    lru_.push_front(Entry{key, {}, t, t, 0});
    index_[id] = lru_.begin();
    e = &lru_.front();
  }
  e->last_seen = t;
  e->idle_ms = g.limits().idle_expiry.count();
  return *e;
}

void BudgetLedger::refill(User& u, double per_minute) const {
  const int64_t t = now();
  if (u.tokens < 0) {
    u.tokens = per_minute;
    u.refilled = t;
    return;
  }
  u.tokens = std::min(per_minute, u.tokens + per_minute * static_cast<double>(t - u.refilled) / 60000.0);
  u.refilled = t;
}

guards::BudgetCounters BudgetLedger::counters(const BudgetKey& key) const {
  std::lock_guard lock(mu_);
  auto it = index_.find(key.id());
  if (it == index_.end()) return {};
  const Entry& e = *it->second;
  if (now() - e.last_seen >= e.idle_ms) return {};
  return e.counters;
}

guards::GuardResult BudgetLedger::localCheck(const BudgetGuard& g, const BudgetKey& key,
                                             const guards::BudgetCounters& c) const {
  const BudgetLimits& l = g.limits();
  if (l.max_denied > 0 && c.denied >= l.max_denied) return g.deniedExhausted(c);
  if (l.max_rows > 0 && c.rows >= l.max_rows) return g.rowsExhausted(c);
  if (l.max_statements > 0 && c.statements >= l.max_statements) return g.statementsExhausted(c, key.conversation);
  auto u = users_.find(key.user);
  if (l.per_user_rate > 0 && u != users_.end() && u->second.tokens >= 0) {
    User copy = u->second;
    refill(copy, l.per_user_rate);
    if (copy.tokens < 1.0) return g.rateLimited(key.user, (1.0 - copy.tokens) * 60.0 / l.per_user_rate);
  }
  if (l.per_user_concurrent > 0 && u != users_.end() && u->second.running >= l.per_user_concurrent) {
    return g.tooManyRunning(u->second.running);
  }
  return {};
}

guards::GuardResult BudgetLedger::check(const BudgetGuard& g, const BudgetKey& key) const {
  std::lock_guard lock(mu_);
  const Entry* e = peek(key.id(), g);
  return localCheck(g, key, e ? e->counters : guards::BudgetCounters{});
}

void BudgetLedger::countAdmitted(const BudgetGuard& g, const BudgetKey& key, int64_t statements) {
  const BudgetLimits& l = g.limits();
  if (l.per_user_rate > 0 || l.per_user_concurrent > 0) {
    if (users_.size() >= max_conversations_ && !users_.count(key.user)) {
      // Bounded: forget users with nothing running (their bucket refills to full anyway).
      for (auto it = users_.begin(); it != users_.end();) {
        it = it->second.running == 0 ? users_.erase(it) : std::next(it);
      }
    }
    User& u = users_[key.user];
    if (l.per_user_rate > 0) {
      refill(u, l.per_user_rate);
      u.tokens -= static_cast<double>(statements);
    }
    ++u.running;
  }
}

BudgetLedger::Admission BudgetLedger::admit(const BudgetGuard& g, const BudgetKey& key, AdmitDone done,
                                            int64_t statements) {
  std::unique_lock lock(mu_);
  Admission a;
  statements = std::max<int64_t>(statements, 1);
  if (now() - last_sweep_ >= kSweepEveryMs) sweep();
  {
    Entry& e = touch(key, g);
    guards::GuardResult r = localCheck(g, key, e.counters);
    const int64_t max = g.limits().max_statements;
    if (r.action != guards::Action::kDeny && !g.store().shared && max > 0 &&
        e.counters.statements + statements > max) {
      r = g.textOverBudget(e.counters, statements);
    }
    if (r.action == guards::Action::kDeny) {
      a.kind = Admission::Kind::kDenied;
      a.denial = std::move(r);
      return a;
    }
  }
  if (!g.store().shared) {
    touch(key, g).counters.statements += statements;
    countAdmitted(g, key, statements);
    return a;
  }
  SharedBudgetStore* store = storeFor(g.store());
  if (!store) {
    ++store_failures_;
    if (g.store().fail_open) {
      touch(key, g).counters.statements += statements;
      countAdmitted(g, key, statements);
      return a;
    }
    a.kind = Admission::Kind::kDenied;
    a.denial = g.unavailable();
    return a;
  }
  const uint64_t ticket = next_ticket_++;
  a.kind = Admission::Kind::kPending;
  a.ticket = ticket;
  // The guard may be gone by the time the answer comes (a reload): keep what is needed.
  auto guard = std::make_shared<BudgetGuard>(g);
  std::weak_ptr<bool> alive = alive_;
  // A store should answer later, but if it answers inside admit() the answer is returned here.
  struct CallState {
    bool in_call = true;
    std::optional<Admission> sync;
  };
  auto call = std::make_shared<CallState>();
  pending_[ticket] = PendingAdmit{store, 0};
  const uint64_t store_ticket = store->admit(
      key, g.limits(), statements,
      [this, alive, ticket, key, guard, call, statements, done = std::move(done)](Result<SharedBudgetStore::Answer> r) {
        if (alive.expired() || !*alive.lock()) return;
        std::unique_lock answer_lock(mu_);
        if (pending_.erase(ticket) == 0) return;  // cancelled
        Admission out;
        if (!r.ok()) {
          ++store_failures_;
          spdlog::warn("budget: shared store failed for user={} conversation_id={}: {}",
                       logsafe(key.user), logsafe(key.conversation),
                       logsafe(r.error(), kLogMessageMaxBytes));
          if (guard->store().fail_open) {
            touch(key, *guard).counters.statements += statements;
            countAdmitted(*guard, key, statements);
          } else {
            out.kind = Admission::Kind::kDenied;
            out.denial = guard->unavailable();
          }
        } else {
          Entry& e = touch(key, *guard);
          e.counters = r->counters;  // the shared truth, mirrored for checks and the admin view
          if (r->admitted) {
            countAdmitted(*guard, key, statements);
          } else {
            // The same verdicts, in the same order, as the memory ledger gives.
            out.kind = Admission::Kind::kDenied;
            out.denial = localCheck(*guard, key, e.counters);
            const int64_t max = guard->limits().max_statements;
            if (out.denial.action != guards::Action::kDeny && max > 0 &&
                e.counters.statements + statements > max) {
              out.denial = guard->textOverBudget(e.counters, statements);
            }
            if (out.denial.action != guards::Action::kDeny) {
              out.denial = guard->statementsExhausted(e.counters, key.conversation);
            }
          }
        }
        if (call->in_call) {
          call->sync = std::move(out);
          return;
        }
        answer_lock.unlock();  // the session goes on without holding up the other loops
        if (done) done(std::move(out));
      });
  call->in_call = false;
  if (call->sync) return std::move(*call->sync);
  if (auto it = pending_.find(ticket); it != pending_.end()) it->second.store_ticket = store_ticket;
  return a;
}

void BudgetLedger::cancel(uint64_t ticket) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(ticket);
  if (it == pending_.end()) return;
  PendingAdmit p = it->second;
  pending_.erase(it);
  p.store->cancel(p.store_ticket);
}

void BudgetLedger::addRows(const BudgetGuard& g, const BudgetKey& key, int64_t rows) {
  std::lock_guard lock(mu_);
  if (rows <= 0) return;
  touch(key, g).counters.rows += rows;
  if (g.store().shared) {
    if (SharedBudgetStore* s = storeFor(g.store())) s->addRows(key, g.limits(), rows);
  }
}

void BudgetLedger::addDenied(const BudgetGuard& g, const BudgetKey& key, int64_t statements) {
  std::lock_guard lock(mu_);
  statements = std::max<int64_t>(statements, 1);
  touch(key, g).counters.denied += statements;
  if (g.store().shared) {
    if (SharedBudgetStore* s = storeFor(g.store())) s->addDenied(key, g.limits(), statements);
  }
}

void BudgetLedger::release(const BudgetKey& key) {
  std::lock_guard lock(mu_);
  auto it = users_.find(key.user);
  if (it != users_.end() && it->second.running > 0) --it->second.running;
}

void BudgetLedger::sweep() {
  std::lock_guard lock(mu_);
  const int64_t t = now();
  last_sweep_ = t;
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (t - it->last_seen >= it->idle_ms) {
      index_.erase(it->key.id());
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<ConversationUsage> BudgetLedger::conversations(size_t limit) const {
  std::lock_guard lock(mu_);
  std::vector<ConversationUsage> out;
  const int64_t t = now();
  for (const auto& e : lru_) {
    if (out.size() >= limit) break;
    if (t - e.last_seen >= e.idle_ms) continue;
    out.push_back({e.key.user, e.key.conversation, e.counters, e.window_start, e.last_seen});
  }
  return out;
}

std::vector<UserUsage> BudgetLedger::users() const {
  std::lock_guard lock(mu_);
  std::vector<UserUsage> out;
  for (const auto& [name, u] : users_) out.push_back({name, u.tokens, u.running});
  return out;
}

SharedBudgetStore* BudgetLedger::storeFor(const BudgetStoreConfig& cfg) {
  // A store is driven by the loop of the thread that made it: one per (thread, DSN).
  const StoreKey key{std::this_thread::get_id(), cfg.dsn};
  auto it = stores_.find(key);
  if (it != stores_.end()) return it->second.get();
  if (!store_factory_) return nullptr;
  auto store = store_factory_(cfg);
  if (!store) return nullptr;
  return (stores_[key] = std::move(store)).get();
}

void BudgetLedger::releaseStoresOfThisThread() {
  std::lock_guard lock(mu_);
  const auto me = std::this_thread::get_id();
  for (auto it = stores_.begin(); it != stores_.end();) {
    if (it->first.first != me) {
      ++it;
      continue;
    }
    SharedBudgetStore* store = it->second.get();
    for (auto p = pending_.begin(); p != pending_.end();) {
      if (p->second.store == store) {
        store->cancel(p->second.store_ticket);
        p = pending_.erase(p);
      } else {
        ++p;
      }
    }
    it = stores_.erase(it);
  }
}

}  // namespace pgwarden::budgets
