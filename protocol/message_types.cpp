// The two message tables, one list per direction (as Envoy's postgres decoder registers its
// frontend and backend messages in DecoderImpl::initialize). A type missing from a list is
// unknown in that direction: frameCap still bounds it, and dispatch treats it as out of order.
#include "protocol/message_types.h"

#include <initializer_list>

#include "protocol/messages.h"

namespace pgwarden::protocol {

namespace {

constexpr MessageTable makeTable(std::initializer_list<MessageType> known, LengthCap unknown_cap) {
  MessageTable t{};
  for (size_t i = 0; i < t.size(); ++i) {
    t[i].type = static_cast<char>(i);
    t[i].cap = unknown_cap;
  }
  for (const MessageType& m : known) t[static_cast<unsigned char>(m.type)] = m;
  return t;
}

// Frontend: {type, name, cap, needs_server, batch, -, -, answered by}.
constexpr MessageType frontend(char type, std::string_view name, LengthCap cap, bool needs_server,
                               Batch batch, std::string_view answered_by) {
  return MessageType{type, name, cap, needs_server, batch, Reply::kUnknown, false, answered_by};
}
// Backend: {type, name, kBackend, -, -, reply, streams, answers}.
constexpr MessageType backend(char type, std::string_view name, Reply reply,
                              std::string_view answers, bool streams = false) {
  return MessageType{type, name, LengthCap::kBackend, false, Batch::kNone, reply, streams, answers};
}

using L = LengthCap;
using B = Batch;
using R = Reply;

}  // namespace

// What a frontend message is answered by, besides an ErrorResponse. A Describe of a statement
// gets ParameterDescription then RowDescription or NoData; of a portal, one of the last two.
// Execute and Query produce rows, a command tag, an empty-query answer or a COPY sub-protocol;
// only Execute can stop at PortalSuspended; Query and Sync end with ReadyForQuery.
constinit const MessageTable kFrontendMessages = makeTable(
    {
        frontend(fe::kBind, "Bind", L::kLarge, true, B::kOpens, "2"),
        frontend(fe::kClose, "Close", L::kMessage, true, B::kOpens, "3"),
        frontend(fe::kCopyData, "CopyData", L::kLarge, false, B::kNone, ""),
        frontend(fe::kCopyDone, "CopyDone", L::kMessage, false, B::kNone, ""),
        frontend(fe::kCopyFail, "CopyFail", L::kMessage, false, B::kNone, ""),
        frontend(fe::kDescribe, "Describe", L::kMessage, true, B::kOpens, "tTn"),
        frontend(fe::kExecute, "Execute", L::kMessage, true, B::kOpens, "DCIsGHWdc"),
        frontend(fe::kFlush, "Flush", L::kMessage, false, B::kOpens, ""),
        frontend(fe::kFunctionCall, "FunctionCall", L::kLarge, false, B::kNone, "VZ"),
        frontend(fe::kParse, "Parse", L::kMessage, true, B::kOpens, "1"),
        frontend(fe::kPassword, "PasswordMessage", L::kMessage, false, B::kNone, "R"),
        frontend(fe::kQuery, "Query", L::kMessage, true, B::kNone, "TDCIGHWdcZ"),
        frontend(fe::kSync, "Sync", L::kMessage, false, B::kCloses, "Z"),
        frontend(fe::kTerminate, "Terminate", L::kMessage, false, B::kNone, ""),
    },
    L::kMessage);

constinit const MessageTable kBackendMessages = makeTable(
    {
        backend(be::kAuthentication, "Authentication", R::kLogin, "p"),
        backend(be::kBackendKeyData, "BackendKeyData", R::kLogin, ""),
        backend(be::kNegotiateProtocolVersion, "NegotiateProtocolVersion", R::kLogin, ""),
        backend(be::kNoticeResponse, "NoticeResponse", R::kAnyTime, ""),
        backend(be::kNotificationResponse, "NotificationResponse", R::kAnyTime, ""),
        backend(be::kParameterStatus, "ParameterStatus", R::kAnyTime, ""),
        backend(be::kErrorResponse, "ErrorResponse", R::kError, ""),
        backend(be::kParseComplete, "ParseComplete", R::kStepDone, "P"),
        backend(be::kBindComplete, "BindComplete", R::kStepDone, "B"),
        backend(be::kCloseComplete, "CloseComplete", R::kStepDone, "C"),
        backend(be::kParameterDescription, "ParameterDescription", R::kDescription, "D"),
        backend(be::kNoData, "NoData", R::kDescription, "D"),
        backend(be::kRowDescription, "RowDescription", R::kDescription, "DQ"),
        backend(be::kDataRow, "DataRow", R::kRow, "EQ", true),
        backend(be::kCommandComplete, "CommandComplete", R::kCommandDone, "EQ"),
        backend(be::kEmptyQueryResponse, "EmptyQueryResponse", R::kEmptyQuery, "EQ"),
        backend(be::kPortalSuspended, "PortalSuspended", R::kSuspended, "E"),
        backend(be::kCopyInResponse, "CopyInResponse", R::kCopy, "EQ"),
        backend(be::kCopyOutResponse, "CopyOutResponse", R::kCopy, "EQ"),
        backend(be::kCopyBothResponse, "CopyBothResponse", R::kCopy, "EQ"),
        backend(be::kCopyData, "CopyData", R::kCopy, "EQ", true),
        backend(be::kCopyDone, "CopyDone", R::kCopy, "EQ"),
        backend(be::kFunctionCallResponse, "FunctionCallResponse", R::kFunctionResult, "F"),
        backend(be::kReadyForQuery, "ReadyForQuery", R::kReady, "QSF"),
    },
    L::kBackend);

std::string messageName(char type, bool from_backend) {
  const MessageType& m = from_backend ? backendMessage(type) : frontendMessage(type);
  if (m.known()) return std::string(m.name);
  return "type " + std::to_string(static_cast<int>(static_cast<unsigned char>(type)));
}

uint32_t frameCap(char type, const FrameLimits& limits, bool from_backend) {
  const MessageType& m = from_backend ? backendMessage(type) : frontendMessage(type);
  switch (m.cap) {
    case LengthCap::kMessage:
      return limits.max_message;
    case LengthCap::kLarge:
      return limits.max_bind;
    case LengthCap::kBackend:
      return limits.max_backend;
  }
  return limits.max_message;
}

}  // namespace pgwarden::protocol
