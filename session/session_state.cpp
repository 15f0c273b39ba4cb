// Transition tables for the client session and server connection state machines. Written as
// switches without `default:` so that adding a state makes -Wswitch point here.
#include "session/session_state.h"

namespace pgwarden::daemon {

const char* stateName(ClientState s) {
  switch (s) {
    case ClientState::kStartup: return "startup";
    case ClientState::kAuth: return "auth";
    case ClientState::kAcquiring: return "acquiring";
    case ClientState::kAttaching: return "attaching";
    case ClientState::kReady: return "ready";
    case ClientState::kClosing: return "closing";
    case ClientState::kClosed: return "closed";
  }
  return "?";
}

const char* stateName(ServerState s) {
  switch (s) {
    case ServerState::kResolving: return "resolving";
    case ServerState::kConnecting: return "connecting";
    case ServerState::kLogin: return "login";
    case ServerState::kIdle: return "idle";
    case ServerState::kActive: return "active";
    case ServerState::kResetting: return "resetting";
    case ServerState::kDraining: return "draining";
    case ServerState::kClosing: return "closing";
    case ServerState::kClosed: return "closed";
  }
  return "?";
}

bool legalTransition(ClientState from, ClientState to) {
  // Any live state may close; only a closing one may become closed.
  if (to == ClientState::kClosing) return from != ClientState::kClosing && from != ClientState::kClosed;
  switch (from) {
    case ClientState::kStartup:
      // A trust login skips the exchange; an SSLRequest keeps us in kStartup (not a move).
      // The admin console (database "pgwarden") has no server to wait for: straight to kReady.
      return to == ClientState::kAuth || to == ClientState::kAcquiring || to == ClientState::kReady;
    case ClientState::kAuth:
      return to == ClientState::kAcquiring || to == ClientState::kReady;
    case ClientState::kAcquiring:
      return to == ClientState::kAttaching;
    case ClientState::kAttaching:
      return to == ClientState::kReady;
    case ClientState::kReady:
      return false;
    case ClientState::kClosing:
      return to == ClientState::kClosed;
    case ClientState::kClosed:
      return false;
  }
  return false;
}

bool legalTransition(ServerState from, ServerState to) {
  if (to == ServerState::kClosing) return from != ServerState::kClosing && from != ServerState::kClosed;
  switch (from) {
    case ServerState::kResolving:
      return to == ServerState::kConnecting;
    case ServerState::kConnecting:
      return to == ServerState::kLogin;
    case ServerState::kLogin:
      // A connection opened for a waiting client goes straight to it.
      return to == ServerState::kIdle || to == ServerState::kActive;
    case ServerState::kIdle:
      return to == ServerState::kActive;
    case ServerState::kActive:
      // Back to idle without a reset: a transaction-pooled client's transaction ended.
      return to == ServerState::kResetting || to == ServerState::kDraining || to == ServerState::kIdle;
    case ServerState::kResetting:
      return to == ServerState::kIdle;
    case ServerState::kDraining:
      return to == ServerState::kResetting;
    case ServerState::kClosing:
      return to == ServerState::kClosed;
    case ServerState::kClosed:
      return false;
  }
  return false;
}

}  // namespace pgwarden::daemon
