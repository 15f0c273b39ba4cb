// The v3 message types by name, and one table per direction saying what each type is: its name,
// which length cap applies, whether pgwarden needs a server connection for it, how it moves an
// extended-protocol batch, and which messages of the other direction it answers or is answered by.
// Code that dispatches on a message type reads these instead of spelling 'P' or 'Z' itself.
// Types: https://www.postgresql.org/docs/15/protocol-message-formats.html
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace pgwarden::protocol {

// Frontend (client -> server) message types.
namespace fe {
inline constexpr char kBind = 'B';
inline constexpr char kClose = 'C';
inline constexpr char kCopyData = 'd';
inline constexpr char kCopyDone = 'c';
inline constexpr char kCopyFail = 'f';
inline constexpr char kDescribe = 'D';
inline constexpr char kExecute = 'E';
inline constexpr char kFlush = 'H';
inline constexpr char kFunctionCall = 'F';
inline constexpr char kParse = 'P';
inline constexpr char kPassword = 'p';  // also SASLInitialResponse, SASLResponse, GSSResponse
inline constexpr char kQuery = 'Q';
inline constexpr char kSync = 'S';
inline constexpr char kTerminate = 'X';
}  // namespace fe

// Backend (server -> client) message types.
namespace be {
inline constexpr char kAuthentication = 'R';
inline constexpr char kBackendKeyData = 'K';
inline constexpr char kBindComplete = '2';
inline constexpr char kCloseComplete = '3';
inline constexpr char kCommandComplete = 'C';
inline constexpr char kCopyBothResponse = 'W';
inline constexpr char kCopyData = 'd';
inline constexpr char kCopyDone = 'c';
inline constexpr char kCopyInResponse = 'G';
inline constexpr char kCopyOutResponse = 'H';
inline constexpr char kDataRow = 'D';
inline constexpr char kEmptyQueryResponse = 'I';
inline constexpr char kErrorResponse = 'E';
inline constexpr char kFunctionCallResponse = 'V';
inline constexpr char kNegotiateProtocolVersion = 'v';
inline constexpr char kNoData = 'n';
inline constexpr char kNoticeResponse = 'N';
inline constexpr char kNotificationResponse = 'A';
inline constexpr char kParameterDescription = 't';
inline constexpr char kParameterStatus = 'S';
inline constexpr char kParseComplete = '1';
inline constexpr char kPortalSuspended = 's';
inline constexpr char kReadyForQuery = 'Z';
inline constexpr char kRowDescription = 'T';
}  // namespace be

// Which of FrameLimits' caps bounds a message's length.
enum class LengthCap : uint8_t {
  kMessage,  // FrameLimits::max_message
  kLarge,    // FrameLimits::max_bind: messages that carry values (Bind, CopyData, FunctionCall)
  kBackend,  // FrameLimits::max_backend: anything from the server
};

// How a frontend message moves the extended-protocol batch (the messages up to a Sync).
enum class Batch : uint8_t {
  kNone,    // outside the extended protocol (Query, Terminate, COPY data, password)
  kOpens,   // an extended-protocol message: a batch is open until its Sync
  kCloses,  // Sync
};

// What a backend message is to the reply it belongs to.
enum class Reply : uint8_t {
  kUnknown,         // not a backend type: out of order wherever it comes
  kLogin,           // Authentication, BackendKeyData, NegotiateProtocolVersion
  kAnyTime,         // NoticeResponse, NotificationResponse, ParameterStatus: may come at any time
  kError,           // ErrorResponse: ends whatever it answers
  kStepDone,        // ParseComplete, BindComplete, CloseComplete
  kDescription,     // ParameterDescription, RowDescription, NoData
  kRow,             // DataRow
  kCommandDone,     // CommandComplete
  kEmptyQuery,      // EmptyQueryResponse
  kSuspended,       // PortalSuspended
  kCopy,            // CopyIn/Out/BothResponse, CopyData, CopyDone
  kFunctionResult,  // FunctionCallResponse
  kReady,           // ReadyForQuery
};

struct MessageType {
  char type = 0;
  std::string_view name;  // "" for a type the direction does not know
  LengthCap cap = LengthCap::kMessage;
  // Frontend: pgwarden takes a server connection for it. With none held, pgwarden answers a
  // Sync itself and a Flush has nothing to flush; FunctionCall, COPY data outside COPY, a late
  // password and Terminate never reach a server.
  bool needs_server = false;
  Batch batch = Batch::kNone;     // frontend only
  Reply reply = Reply::kUnknown;  // backend only
  // Backend: may reach the client in pieces before it is whole (DataRow, CopyData).
  bool streams = false;
  // Frontend: the backend types that answer it. Backend: the frontend types it answers. An
  // ErrorResponse answers any of them and is not listed.
  std::string_view replies;

  bool known() const { return !name.empty(); }
};

using MessageTable = std::array<MessageType, 256>;

// The tables, built once from the lists in message_types.cpp.
extern const MessageTable kFrontendMessages;
extern const MessageTable kBackendMessages;

inline const MessageType& frontendMessage(char type) {
  return kFrontendMessages[static_cast<unsigned char>(type)];
}
inline const MessageType& backendMessage(char type) {
  return kBackendMessages[static_cast<unsigned char>(type)];
}
// A printable name for logs and errors: the table's, or "type N" (the byte's value) when unknown.
std::string messageName(char type, bool from_backend);

}  // namespace pgwarden::protocol
