// Admission of MCP sessions: per-principal caps, the global cap taken from the principal holding
// the most, sessions with a call or a write transaction never ended; and the words a request for
// an ended session gets.
#include "mcp/session_admission.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pgwarden::mcp {
namespace {

using Kind = Admission::Kind;

struct Held {
  std::vector<std::string> ids;
  std::vector<std::string> principals;
  std::vector<SessionSlot> slots;
  void add(const std::string& id, const std::string& principal, uint64_t used,
           bool evictable = true) {
    ids.push_back(id);
    principals.push_back(principal);
    slots.push_back(SessionSlot{{}, {}, used, evictable});
  }
  const std::vector<SessionSlot>& view() {
    for (size_t i = 0; i < slots.size(); ++i) {
      slots[i].id = ids[i];
      slots[i].principal = principals[i];
    }
    return slots;
  }
};

TEST(SessionAdmission, AdmitsUnderBothCaps) {
  Held h;
  h.add("a1", "token:a", 1);
  EXPECT_EQ(admitSession("token:a", h.view(), 4, 2).kind, Kind::kAdmit);
}

// The flood: the loopback caller at its own cap makes room among its own sessions, never
// among the token callers'.
TEST(SessionAdmission, AtItsOwnCapACallerGivesUpItsOwnOldest) {
  Held h;
  h.add("t1", "token:a", 1);
  h.add("l1", "loopback", 5);
  h.add("l2", "loopback", 3);
  const Admission a = admitSession("loopback", h.view(), 64, 2);
  EXPECT_EQ(a.kind, Kind::kEvict);
  EXPECT_EQ(a.victim, "l2");
  EXPECT_EQ(a.why, SessionEnd::kEvictedOwnCap);
}

TEST(SessionAdmission, ASessionWithACallOrATransactionIsNeverEnded) {
  Held h;
  h.add("w1", "token:w", 1, false);  // holds a write transaction
  h.add("w2", "token:w", 2);
  const Admission a = admitSession("token:w", h.view(), 64, 2);
  EXPECT_EQ(a.kind, Kind::kEvict);
  EXPECT_EQ(a.victim, "w2");
  Held busy;
  busy.add("w1", "token:w", 1, false);
  busy.add("w2", "token:w", 2, false);
  EXPECT_EQ(admitSession("token:w", busy.view(), 64, 2).kind, Kind::kRefuseOwnCap);
}

TEST(SessionAdmission, AtTheGlobalCapThePrincipalHoldingTheMostGivesOneUp) {
  Held h;
  h.add("a1", "token:a", 1);  // the oldest of all, but its caller holds one session
  h.add("b1", "token:b", 4);
  h.add("b2", "token:b", 2);
  h.add("b3", "token:b", 3);
  const Admission a = admitSession("token:c", h.view(), 4, 16);
  EXPECT_EQ(a.kind, Kind::kEvict);
  EXPECT_EQ(a.victim, "b2");
  EXPECT_EQ(a.why, SessionEnd::kEvictedGlobalCap);
  // The newcomer's own caller, when it holds as many as anyone, pays first.
  const Admission own = admitSession("token:b", h.view(), 4, 16);
  EXPECT_EQ(own.victim, "b2");
  EXPECT_EQ(own.why, SessionEnd::kEvictedOwnCap);
}

TEST(SessionAdmission, AtTheGlobalCapNobodySmallerPaysForTheBiggest) {
  Held h;
  h.add("a1", "token:a", 1);
  h.add("b1", "token:b", 2, false);
  h.add("b2", "token:b", 3, false);
  EXPECT_EQ(admitSession("token:c", h.view(), 3, 16).kind, Kind::kRefuseGlobalCap);
}

TEST(EndedSessions, RemembersTheLatestAndForgetsTheOldest) {
  EndedSessions e(2);
  e.remember("s1", {"agent", SessionEnd::kIdle, false});
  e.remember("s2", {"agent", SessionEnd::kDeleted, false});
  e.remember("s3", {"agent", SessionEnd::kEvictedOwnCap, true});
  EXPECT_EQ(e.size(), 2u);
  EXPECT_EQ(e.find("s1"), nullptr);
  ASSERT_NE(e.find("s3"), nullptr);
  EXPECT_TRUE(e.find("s3")->rolled_back);
}

TEST(EndedSessions, ARequestForAnEndedSessionHearsWhyAndWhatToDo) {
  EndedSessions e;
  e.remember("s1", {"writer", SessionEnd::kEvictedGlobalCap, true});
  const Json err = sessionNotFound(e, "s1", "writer");
  EXPECT_EQ(err["error"]["code"], -32001);
  const std::string msg = err["error"]["message"];
  EXPECT_NE(msg.find("this session ended (evicted"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TRANSACTION_ROLLED_BACK"), std::string::npos) << msg;
  EXPECT_NE(msg.find("send initialize"), std::string::npos) << msg;
  EXPECT_EQ(err["error"]["data"]["code"], "TRANSACTION_ROLLED_BACK");
  EXPECT_EQ(err["error"]["data"]["reason"], "evicted");
  // Another user naming the id learns nothing of it; an unknown id says what to do too.
  for (const Json& other :
       {sessionNotFound(e, "s1", "agent"), sessionNotFound(e, "nope", "writer")}) {
    EXPECT_EQ(other["error"]["data"]["code"], "SESSION_NOT_FOUND");
    EXPECT_NE(other["error"]["message"].get<std::string>().find("send initialize"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace pgwarden::mcp
