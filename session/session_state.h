// The states of a client session and of a server connection, and the only legal moves between
// them. Every state change goes through one transition function per object that checks its move
// against these tables, so an impossible move is caught where it happens.
#pragma once

namespace pgwarden::daemon {

enum class ClientState {
  kStartup,    // waiting for the StartupMessage (an SSLRequest/GSSENCRequest was answered 'N')
  kAuth,       // the password exchange is in progress
  kAcquiring,  // authenticated; waiting for a server connection from the pool
  kAttaching,  // a server connection is ours; applying the client's parameters with SET
  kReady,      // proxying statements
  kClosing,    // the socket is closing; nothing more is read or written
  kClosed,     // the close callback has run; the session may be freed
};

enum class ServerState {
  kResolving,   // looking up the upstream host name
  kConnecting,  // TCP/Unix connect in progress
  kLogin,       // StartupMessage sent; authenticating and reading ParameterStatus
  kIdle,        // in the pool, ready for a client
  kActive,      // lent to a client session
  kResetting,   // ROLLBACK/DISCARD ALL in flight before it goes back to the pool
  kDraining,    // its client left mid-statement: cancelled, waiting for ReadyForQuery
  kClosing,
  kClosed,
};

const char* stateName(ClientState s);
const char* stateName(ServerState s);

// True when `from` -> `to` is a move the session may make. Staying in a state is not a move.
bool legalTransition(ClientState from, ClientState to);
bool legalTransition(ServerState from, ServerState to);

}  // namespace pgwarden::daemon
