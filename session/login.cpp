// A client session's login state and its cancel key.
#include "session/login.h"

#include "protocol/messages.h"
#include "session/session_host.h"

namespace pgwarden::session {

ClientAuth& Login::startAuth(std::unique_ptr<ClientAuth> auth) {
  auth_ = std::move(auth);
  return *auth_;
}

bool Login::firstAttachEnd() {
  if (attach_ended_) return false;
  attach_ended_ = true;
  return true;
}

void CancelKey::registerWith(SessionHost& host, ClientSession* session) {
  if (registered_) return;
  host.registerCancelKey(session, pid_, secret_);
  registered_ = true;
}

void CancelKey::unregister(SessionHost& host) {
  if (!registered_) return;
  host.unregisterCancelKey(pid_, secret_);
  registered_ = false;
}

void CancelKey::writeBackendKeyData(std::string& out) const {
  protocol::writeBackendKeyData(out, pid_, secret_);
}

}  // namespace pgwarden::session
