// After a denial or a failed message in an extended-protocol batch, PostgreSQL (and pgwarden,
// which mirrors it) ignores every message up to the next Sync. The statements those messages
// named were still sent by the client, and each one must be accounted for: SkippedBatch follows
// the skipped Parse, Bind and Execute messages and says, for each skipped Execute, which
// statement it would have run, so that statement gets its "not executed" record.
//
// It knows only the names the skipped messages use; what a name meant before the batch
// started (a statement or portal the session already holds) the session resolves itself.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "session/statement_policy.h"

namespace pgwarden::session {

class SkippedBatch {
 public:
  // What a skipped statement or portal name stands for. `recorded`: that statement already
  // has its record (it is the one that was denied or failed) and gets no second one.
  struct Target {
    std::shared_ptr<const StatementPlan> plan;
    bool recorded = false;
  };
  // How a skipped Execute's portal is found: in the batch, or (not found) in the session.
  struct Lookup {
    bool found = false;  // the batch bound this portal
    Target target;       // when found: what it runs (plan may be null: nothing known)
  };

  // Starts a new skipped stretch (forgets the names of the previous one). At most `max_names`
  // statement and as many portal names are remembered (beyond them a name resolves as the
  // session knows it): memory stays bounded whatever the client sends before its Sync.
  void begin(std::string_view sqlstate, std::string_view reason, size_t max_names);
  void end();
  bool active() const { return active_; }
  const std::string& sqlstate() const { return sqlstate_; }
  // "not executed: ..." with the reason the stretch began.
  const std::string& message() const { return message_; }

  // Statement `name` means `target` from here to the end of the stretch.
  void statement(std::string_view name, Target target);
  // Portal `portal` runs `target`.
  void portal(std::string_view portal, Target target);
  // What a skipped Bind's statement name means in this stretch (nullopt: not named in it).
  std::optional<Target> findStatement(std::string_view name) const;
  // A skipped Execute of `portal`: what it would have run, if the stretch bound it.
  Lookup execute(std::string_view portal) const;
  size_t size() const { return statements_.size() + portals_.size(); }

 private:
  bool active_ = false;
  size_t max_names_ = 0;
  std::string sqlstate_;
  std::string message_;
  std::unordered_map<std::string, Target> statements_;
  std::unordered_map<std::string, Target> portals_;
};

}  // namespace pgwarden::session
