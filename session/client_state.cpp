// The transition table of the client session's state machine. Written as
// switches without `default:` so that adding a state makes -Wswitch point here.
#include "session/client_state.h"

namespace pgwarden::session {

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

}  // namespace pgwarden::session
