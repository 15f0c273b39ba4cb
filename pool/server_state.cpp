// The transition table of the server connection's state machine. Written as switches without
// `default:` so that adding a state makes -Wswitch point here.
#include "pool/server_state.h"

namespace pgwarden::pool {

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

}  // namespace pgwarden::pool
