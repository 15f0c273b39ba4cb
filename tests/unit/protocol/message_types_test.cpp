// The message tables: every named type is known in its direction, the two directions agree on
// which message answers which, the encoders write the types the tables name, and the caps,
// server needs and batch moves are the ones the session and the frame buffer rely on.
#include "protocol/message_types.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace pgwarden::protocol {
namespace {

const std::vector<char> kFrontendTypes = {
    fe::kBind,     fe::kClose,   fe::kCopyData, fe::kCopyDone,     fe::kCopyFail,
    fe::kDescribe, fe::kExecute, fe::kFlush,    fe::kFunctionCall, fe::kParse,
    fe::kPassword, fe::kQuery,   fe::kSync,     fe::kTerminate};
const std::vector<char> kBackendTypes = {be::kAuthentication,
                                         be::kBackendKeyData,
                                         be::kBindComplete,
                                         be::kCloseComplete,
                                         be::kCommandComplete,
                                         be::kCopyBothResponse,
                                         be::kCopyData,
                                         be::kCopyDone,
                                         be::kCopyInResponse,
                                         be::kCopyOutResponse,
                                         be::kDataRow,
                                         be::kEmptyQueryResponse,
                                         be::kErrorResponse,
                                         be::kFunctionCallResponse,
                                         be::kNegotiateProtocolVersion,
                                         be::kNoData,
                                         be::kNoticeResponse,
                                         be::kNotificationResponse,
                                         be::kParameterDescription,
                                         be::kParameterStatus,
                                         be::kParseComplete,
                                         be::kPortalSuspended,
                                         be::kReadyForQuery,
                                         be::kRowDescription};

size_t knownCount(const MessageTable& t) {
  size_t n = 0;
  for (const MessageType& m : t) n += m.known() ? 1 : 0;
  return n;
}

TEST(MessageTypes, EveryNamedTypeIsKnownOnceAndNothingElse) {
  std::set<std::string_view> names;
  for (char t : kFrontendTypes) {
    const MessageType& m = frontendMessage(t);
    EXPECT_TRUE(m.known()) << t;
    EXPECT_EQ(m.type, t);
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
  }
  EXPECT_EQ(knownCount(kFrontendMessages), kFrontendTypes.size());
  names.clear();
  for (char t : kBackendTypes) {
    const MessageType& m = backendMessage(t);
    EXPECT_TRUE(m.known()) << t;
    EXPECT_EQ(m.type, t);
    EXPECT_EQ(m.cap, LengthCap::kBackend) << m.name;
    EXPECT_NE(m.reply, Reply::kUnknown) << m.name;
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
  }
  EXPECT_EQ(knownCount(kBackendMessages), kBackendTypes.size());
}

TEST(MessageTypes, TheTwoDirectionsAgreeOnWhatAnswersWhat) {
  for (char f : kFrontendTypes) {
    for (char b : frontendMessage(f).replies) {
      ASSERT_TRUE(backendMessage(b).known()) << frontendMessage(f).name << " answered by " << b;
      EXPECT_NE(backendMessage(b).replies.find(f), std::string_view::npos)
          << backendMessage(b).name << " does not say it answers " << frontendMessage(f).name;
    }
  }
  for (char b : kBackendTypes) {
    for (char f : backendMessage(b).replies) {
      ASSERT_TRUE(frontendMessage(f).known()) << backendMessage(b).name << " answers " << f;
      EXPECT_NE(frontendMessage(f).replies.find(b), std::string_view::npos)
          << frontendMessage(f).name << " does not list " << backendMessage(b).name;
    }
  }
  EXPECT_EQ(frontendMessage(fe::kParse).replies, "1");
  EXPECT_EQ(frontendMessage(fe::kSync).replies, "Z");
  // Only an Execute stops at PortalSuspended; only a Query gets a RowDescription unasked.
  EXPECT_EQ(backendMessage(be::kPortalSuspended).replies, "E");
  EXPECT_EQ(backendMessage(be::kRowDescription).replies, "DQ");
}

TEST(MessageTypes, ServerNeedsAndBatchMovesAreTheSessions) {
  std::string needs, opens, closes;
  for (char t : kFrontendTypes) {
    const MessageType& m = frontendMessage(t);
    if (m.needs_server) needs += t;
    if (m.batch == Batch::kOpens) opens += t;
    if (m.batch == Batch::kCloses) closes += t;
  }
  // A Sync or Flush with nothing on the server is answered (or ignored) by pgwarden itself.
  EXPECT_EQ(needs, "BCDEPQ");
  EXPECT_EQ(opens, "BCDEHP");
  EXPECT_EQ(closes, "S");
}

TEST(MessageTypes, ReplyGroupsFollowTheSessionsDispatch) {
  for (char t : {be::kNoticeResponse, be::kNotificationResponse, be::kParameterStatus}) {
    EXPECT_EQ(backendMessage(t).reply, Reply::kAnyTime) << t;
  }
  for (char t : {be::kParseComplete, be::kBindComplete, be::kCloseComplete}) {
    EXPECT_EQ(backendMessage(t).reply, Reply::kStepDone) << t;
  }
  for (char t : {be::kParameterDescription, be::kNoData, be::kRowDescription}) {
    EXPECT_EQ(backendMessage(t).reply, Reply::kDescription) << t;
  }
  for (char t : {be::kCopyInResponse, be::kCopyOutResponse, be::kCopyBothResponse, be::kCopyData,
                 be::kCopyDone}) {
    EXPECT_EQ(backendMessage(t).reply, Reply::kCopy) << t;
  }
  std::string streams;
  for (char t : kBackendTypes) {
    if (backendMessage(t).streams) streams += t;
  }
  EXPECT_EQ(streams, "dD");
}

TEST(MessageTypes, CapsComeFromTheTables) {
  const FrameLimits l{100, 200, 300};
  for (char t : kFrontendTypes) {
    const bool large = t == fe::kBind || t == fe::kCopyData || t == fe::kFunctionCall;
    EXPECT_EQ(frameCap(t, l, false), large ? 200u : 100u) << frontendMessage(t).name;
    EXPECT_EQ(frameCap(t, l, true), 300u);
  }
  // A type neither direction knows still gets a cap: the message one, or the backend's.
  EXPECT_FALSE(frontendMessage('\0').known());
  EXPECT_FALSE(backendMessage('x').known());
  EXPECT_EQ(frameCap('x', l, false), 100u);
  EXPECT_EQ(frameCap('x', l, true), 300u);
}

TEST(MessageTypes, NamesForLogs) {
  EXPECT_EQ(messageName(fe::kSync, false), "Sync");
  EXPECT_EQ(messageName('D', false), "Describe");
  EXPECT_EQ(messageName('D', true), "DataRow");
  EXPECT_EQ(messageName('\x01', false), "type 1");
  EXPECT_EQ(messageName('\xff', true), "type 255");
}

// Each encoder writes the type byte the table gives its message's name.
TEST(MessageTypes, EncodersWriteTheNamedTypes) {
  struct Case {
    std::string bytes;
    bool backend;
    std::string_view name;
  };
  std::vector<Case> cases;
  auto add = [&](bool backend, std::string_view name, auto write) {
    std::string out;
    write(out);
    cases.push_back({out, backend, name});
  };
  add(false, "Query", [](std::string& o) { writeQuery(o, "select 1"); });
  add(false, "Parse", [](std::string& o) { writeParse(o, "", "select 1", {}); });
  add(false, "Bind", [](std::string& o) { writeBind(o, BindMsg{}); });
  add(false, "Describe", [](std::string& o) { writeDescribe(o, 'S', ""); });
  add(false, "Execute", [](std::string& o) { writeExecute(o, "", 0); });
  add(false, "Close", [](std::string& o) { writeClose(o, 'P', ""); });
  add(false, "Sync", [](std::string& o) { writeSync(o); });
  add(false, "Flush", [](std::string& o) { writeFlush(o); });
  add(false, "Terminate", [](std::string& o) { writeTerminate(o); });
  add(false, "PasswordMessage", [](std::string& o) { writePassword(o, "x"); });
  add(false, "CopyFail", [](std::string& o) { writeCopyFail(o, "no"); });
  add(true, "ErrorResponse", [](std::string& o) { writeError(o, "ERROR", "42000", "m"); });
  add(true, "NoticeResponse", [](std::string& o) { writeNotice(o, "NOTICE", "00000", "m"); });
  add(true, "Authentication", [](std::string& o) { writeAuthOk(o); });
  add(true, "ParameterStatus", [](std::string& o) { writeParameterStatus(o, "a", "b"); });
  add(true, "BackendKeyData", [](std::string& o) { writeBackendKeyData(o, 1, 2); });
  add(true, "ReadyForQuery", [](std::string& o) { writeReadyForQuery(o, 'I'); });
  add(true, "CommandComplete", [](std::string& o) { writeCommandComplete(o, "SELECT 1"); });
  add(true, "EmptyQueryResponse", [](std::string& o) { writeEmptyQueryResponse(o); });
  add(true, "ParseComplete", [](std::string& o) { writeParseComplete(o); });
  add(true, "BindComplete", [](std::string& o) { writeBindComplete(o); });
  add(true, "CloseComplete", [](std::string& o) { writeCloseComplete(o); });
  add(true, "NoData", [](std::string& o) { writeNoData(o); });
  add(true, "PortalSuspended", [](std::string& o) { writePortalSuspended(o); });
  add(true, "ParameterDescription", [](std::string& o) { writeParameterDescription(o, {}); });
  add(true, "NegotiateProtocolVersion",
      [](std::string& o) { writeNegotiateProtocolVersion(o, 0, {}); });
  add(true, "RowDescription", [](std::string& o) { writeRowDescription(o, {}); });
  add(true, "DataRow", [](std::string& o) { writeDataRow(o, {}); });
  for (const Case& c : cases) {
    ASSERT_FALSE(c.bytes.empty()) << c.name;
    EXPECT_EQ(messageName(c.bytes[0], c.backend), c.name);
  }
}

}  // namespace
}  // namespace pgwarden::protocol
