// The states of a client session and the only legal moves between them (a server connection's
// are in pool/server_state.h). Every state change goes through one transition function that
// checks its move against this table, so an impossible move is caught where it happens.
#pragma once

namespace pgwarden::session {

enum class ClientState {
  kStartup,    // waiting for the StartupMessage (an SSLRequest/GSSENCRequest was answered 'N')
  kAuth,       // the password exchange is in progress
  kAcquiring,  // authenticated; waiting for a server connection from the pool
  kAttaching,  // a server connection is ours; applying the client's parameters with SET
  kReady,      // proxying statements
  kClosing,    // the socket is closing; nothing more is read or written
  kClosed,     // the close callback has run; the session may be freed
};

const char* stateName(ClientState s);

// True when `from` -> `to` is a move the session may make. Staying in a state is not a move.
bool legalTransition(ClientState from, ClientState to);

}  // namespace pgwarden::session
