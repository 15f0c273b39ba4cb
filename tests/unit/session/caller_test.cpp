// Who a session speaks for: its pgwarden.* settings change with SET and go back with RESET to what
// the session started with, however many SETs came between.
#include "session/caller.h"

#include <gtest/gtest.h>

namespace pgwarden::daemon {
namespace {

using guards::AgentKey;

TEST(Caller, ASessionStartsWithItsStartupValuesAndProvenanceOff) {
  session::Caller c;
  c.startAgent("agent-7", "conv-1", "read");
  EXPECT_EQ(c.agentId(), "agent-7");
  EXPECT_EQ(c.conversationId(), "conv-1");
  EXPECT_EQ(c.queryIntent(), "read");
  EXPECT_EQ(c.provenance(), "off");
  EXPECT_EQ(c.agentSetting(AgentKey::kConversationId), "conv-1");
}

TEST(Caller, ResetGoesBackToTheStartNotToTheLastSet) {
  session::Caller c;
  c.startAgent("agent-7", "conv-1", "");
  c.setAgentSetting(AgentKey::kConversationId, "conv-2");
  c.setAgentSetting(AgentKey::kConversationId, "conv-3");
  c.setAgentSetting(AgentKey::kProvenance, "on");
  EXPECT_EQ(c.conversationId(), "conv-3");
  EXPECT_EQ(c.provenance(), "on");
  c.resetAgentSetting(AgentKey::kConversationId);
  EXPECT_EQ(c.conversationId(), "conv-1");
  EXPECT_EQ(c.provenance(), "on");  // only the key named
  c.resetAgentSetting(AgentKey::kProvenance);
  EXPECT_EQ(c.provenance(), "off");
  c.resetAgentSetting(AgentKey::kAgentId);  // never set: stays
  EXPECT_EQ(c.agentId(), "agent-7");
}

}  // namespace
}  // namespace pgwarden::daemon
