// What a client session keeps only while it logs in: a refusal that waits for the client's
// StartupMessage, the password exchange under way, and the wait for the database's first catalog
// statistics before the first ReadyForQuery. The session drops it once the client is ready
// (ClientSession::setState). Beside it, the cancel key, which the login registers and the
// session's end unregisters.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "metrics/counters.h"
#include "session/client_auth.h"
#include "session/statement_execution.h"

namespace pgwarden::session {

class ClientSession;
class SessionHost;

class Login {
 public:
  // A refusal decided before the client said who it is: given once its StartupMessage is in
  // (or its time is up), so the client reads the reason (ClientSession::rejectAfterStartup).
  struct Reject {
    std::string sqlstate;
    std::string message;
    metrics::RejectReason reason;
  };
  void rejectAfterStartup(Reject r) { reject_ = std::move(r); }
  const std::optional<Reject>& reject() const { return reject_; }

  // The password exchange: started once, ended by its outcome (the object goes with it).
  ClientAuth& startAuth(std::unique_ptr<ClientAuth> auth);
  ClientAuth* auth() { return auth_.get(); }
  void authOver() { auth_.reset(); }

  // The first statistics load of the database, waited for (bounded) at the end of the attach.
  // True the first time only: the session asks the host then whether to wait.
  [[nodiscard]] bool firstAttachEnd();
  void waitForStats(uint64_t now_ms) { stats_wait_.begin(now_ms); }
  // True once, when the wait ends: the statistics are in (`loaded`) or its time is up.
  [[nodiscard]] bool statsWaitOver(uint64_t now_ms, bool loaded) {
    return stats_wait_.over(now_ms, loaded);
  }

 private:
  std::optional<Reject> reject_;
  std::unique_ptr<ClientAuth> auth_;
  bool attach_ended_ = false;
  StatsWait stats_wait_;
};

// The key a client cancels its statements with (BackendKeyData): the host hands it out when the
// login succeeds and forgets it, once, when the session ends.
class CancelKey {
 public:
  void registerWith(SessionHost& host, ClientSession* session);
  void unregister(SessionHost& host);
  bool registered() const { return registered_; }
  void writeBackendKeyData(std::string& out) const;

 private:
  int32_t pid_ = 0;
  int32_t secret_ = 0;
  bool registered_ = false;
};

}  // namespace pgwarden::session
