// The states of a server connection and the only legal moves between them. Every state change
// goes through one transition function that checks its move against this table, so an
// impossible move is caught where it happens.
#pragma once

namespace pgwarden::pool {

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

const char* stateName(ServerState s);

// True when `from` -> `to` is a move the connection may make. Staying in a state is not a move.
bool legalTransition(ServerState from, ServerState to);

}  // namespace pgwarden::pool
