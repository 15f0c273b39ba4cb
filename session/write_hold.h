// What a guarded write holds back while pgwarden settles it (docs/writes.md): the write's Query,
// sent only once its savepoint succeeded, and the server's refusal of that savepoint; a write
// within its cap by the command tag, whose CommandComplete waits for the count of every table it
// changed; and what the transaction state machine reads after a statement (the last command tag,
// whether a BEGIN of the batch is still unanswered).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "session/statement_recorder.h"

namespace pgwarden::session {

class WriteHold {
 public:
  // A write waiting for its count: its run, the rows sent for it, whether it ends its simple
  // Query's text, and its CommandComplete.
  struct Counted {
    QueuedRun run;
    int64_t rows = 0;
    bool last = false;
    std::string command_complete;
  };

  // A BEGIN sent in the batch that has not been answered yet.
  void beginSent() { begin_sent_ = true; }
  bool beginUnanswered() const { return begin_sent_; }
  // A statement's ReadyForQuery: a BEGIN of the batch has been answered by now.
  void statementAnswered() { begin_sent_ = false; }
  // The last command tag of a Query or Execute (its first word: COMMIT, ROLLBACK, INSERT...).
  void noteTag(std::string_view tag) { last_tag_ = std::string(tag); }
  const std::string& lastTag() const { return last_tag_; }

  // The write's Query, sent once its savepoint succeeded.
  void holdQuery(std::string query);
  std::string takeQuery() { return std::exchange(query_, {}); }
  void savepointRefused(std::string_view sqlstate, std::string_view message);
  // The server's refusal of the savepoint (sqlstate, message), if it refused; forgotten here.
  std::optional<std::pair<std::string, std::string>> takeSavepointRefusal();

  // A write within its cap by the tag, waiting for its count.
  void holdCounted(Counted c) { counted_ = std::make_unique<Counted>(std::move(c)); }
  Counted* counted() { return counted_.get(); }
  std::unique_ptr<Counted> takeCounted() { return std::move(counted_); }

 private:
  bool begin_sent_ = false;
  std::string last_tag_;
  std::string query_;
  std::optional<std::pair<std::string, std::string>> refusal_;
  std::unique_ptr<Counted> counted_;
};

}  // namespace pgwarden::session
