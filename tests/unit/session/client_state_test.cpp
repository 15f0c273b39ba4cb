// The state machines' transition tables: the moves a session makes, and none other.
#include "session/client_state.h"
#include "pool/server_state.h"

#include <gtest/gtest.h>

using namespace pgwarden::session;
using namespace pgwarden::pool;

namespace {

const ClientState kAllClient[] = {ClientState::kStartup,   ClientState::kAuth,
                                  ClientState::kAcquiring, ClientState::kAttaching,
                                  ClientState::kReady,     ClientState::kClosing,
                                  ClientState::kClosed};
const ServerState kAllServer[] = {ServerState::kResolving, ServerState::kConnecting,
                                  ServerState::kLogin,     ServerState::kIdle,
                                  ServerState::kActive,    ServerState::kResetting,
                                  ServerState::kDraining,  ServerState::kClosing,
                                  ServerState::kClosed};

}  // namespace

TEST(ClientStates, TheNormalLife) {
  EXPECT_TRUE(legalTransition(ClientState::kStartup, ClientState::kAuth));
  EXPECT_TRUE(legalTransition(ClientState::kAuth, ClientState::kAcquiring));
  EXPECT_TRUE(legalTransition(ClientState::kAcquiring, ClientState::kAttaching));
  EXPECT_TRUE(legalTransition(ClientState::kAttaching, ClientState::kReady));
  EXPECT_TRUE(legalTransition(ClientState::kReady, ClientState::kClosing));
  EXPECT_TRUE(legalTransition(ClientState::kClosing, ClientState::kClosed));
  // Trust skips the password exchange.
  EXPECT_TRUE(legalTransition(ClientState::kStartup, ClientState::kAcquiring));
  // The admin console has no server connection to wait for.
  EXPECT_TRUE(legalTransition(ClientState::kAuth, ClientState::kReady));
  EXPECT_TRUE(legalTransition(ClientState::kStartup, ClientState::kReady));
}

TEST(ClientStates, EveryLiveStateMayClose) {
  for (auto s : kAllClient) {
    const bool live = s != ClientState::kClosing && s != ClientState::kClosed;
    EXPECT_EQ(legalTransition(s, ClientState::kClosing), live) << stateName(s);
  }
}

TEST(ClientStates, AdminConsoleGoesStraightToReady) {
  // The console (database "pgwarden") has no server connection to acquire or attach.
  EXPECT_TRUE(legalTransition(ClientState::kStartup, ClientState::kReady));  // trust login
  EXPECT_TRUE(legalTransition(ClientState::kAuth, ClientState::kReady));
}

TEST(ClientStates, NoShortcutsAndNoWayBack) {
  EXPECT_FALSE(legalTransition(ClientState::kStartup, ClientState::kAttaching));
  EXPECT_FALSE(legalTransition(ClientState::kReady, ClientState::kAuth));
  EXPECT_FALSE(legalTransition(ClientState::kReady, ClientState::kStartup));
  EXPECT_FALSE(legalTransition(ClientState::kStartup, ClientState::kClosed));
  for (auto s : kAllClient) EXPECT_FALSE(legalTransition(ClientState::kClosed, s));
}

TEST(ClientStates, CountOfLegalMoves) {
  int n = 0;
  for (auto a : kAllClient) {
    for (auto b : kAllClient) n += legalTransition(a, b) ? 1 : 0;
  }
  // 6 forward moves + 2 to kReady for the admin console + 5 live states that may close.
  EXPECT_EQ(n, 6 + 2 + 5);
}

TEST(ServerStates, TheNormalLife) {
  EXPECT_TRUE(legalTransition(ServerState::kResolving, ServerState::kConnecting));
  EXPECT_TRUE(legalTransition(ServerState::kConnecting, ServerState::kLogin));
  EXPECT_TRUE(legalTransition(ServerState::kLogin, ServerState::kIdle));
  EXPECT_TRUE(legalTransition(ServerState::kIdle, ServerState::kActive));
  EXPECT_TRUE(legalTransition(ServerState::kActive, ServerState::kResetting));
  EXPECT_TRUE(legalTransition(ServerState::kResetting, ServerState::kIdle));
  // A client that left mid-statement: drain, then reset.
  EXPECT_TRUE(legalTransition(ServerState::kActive, ServerState::kDraining));
  EXPECT_TRUE(legalTransition(ServerState::kDraining, ServerState::kResetting));
}

TEST(ServerStates, NeverBackToAClientWithoutAReset) {
  // Straight back to idle only from a client that let go at an idle ReadyForQuery (transaction
  // pooling's give-back); a connection whose client left mid-statement drains and resets.
  EXPECT_TRUE(legalTransition(ServerState::kActive, ServerState::kIdle));
  EXPECT_FALSE(legalTransition(ServerState::kDraining, ServerState::kIdle));
  EXPECT_FALSE(legalTransition(ServerState::kDraining, ServerState::kActive));
  EXPECT_FALSE(legalTransition(ServerState::kResetting, ServerState::kActive));
  EXPECT_FALSE(legalTransition(ServerState::kConnecting, ServerState::kActive));
  for (auto s : kAllServer) EXPECT_FALSE(legalTransition(ServerState::kClosed, s));
  for (auto s : kAllServer) {
    const bool live = s != ServerState::kClosing && s != ServerState::kClosed;
    EXPECT_EQ(legalTransition(s, ServerState::kClosing), live) << stateName(s);
  }
}

TEST(States, EveryStateHasAName) {
  for (auto s : kAllClient) EXPECT_STRNE(stateName(s), "?");
  for (auto s : kAllServer) EXPECT_STRNE(stateName(s), "?");
}
