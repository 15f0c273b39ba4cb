// Transaction pooling's prepared statements, server side: the statements one server connection
// holds under names of pgwarden's own, keyed by text and parameter types so that clients sending
// the same text share one. Bounded: the least recently used is closed to make room (as
// PgBouncer's max_prepared_statements). Pure bookkeeping; the session sends the messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pgwarden::pool {

// One client's prepared statement as it must be re-created on any server connection.
struct PreparedText {
  PreparedText(std::string_view sql, const std::vector<uint32_t>& types);
  std::string sql;
  std::vector<uint32_t> types;
  std::string key;  // the parameter types (4 bytes each, then a NUL) and the text
};

class ServerStatements {
 public:
  explicit ServerStatements(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The server-side name under which `text` is prepared (and marks it most recently used), or
  // null when it is not.
  const std::string* find(const PreparedText& text);
  // Records `text` as prepared under a new name, returned. When the connection already holds
  // `capacity` statements, the least recently used one is forgotten first and its name put in
  // `evicted` (the caller closes it on the server before anything else uses the name space).
  const std::string& add(std::shared_ptr<const PreparedText> text, std::string* evicted);
  // The server refused (or skipped) the Parse that was to create `text`: forget it.
  void erase(const PreparedText& text);
  // DISCARD ALL ran: the server holds none any more.
  void clear();
  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Entry {
    std::shared_ptr<const PreparedText> text;
    std::string name;
    std::list<std::string_view>::iterator lru;  // position in lru_ (front: most recent)
  };
  size_t capacity_;
  uint64_t next_ = 0;
  std::list<std::string_view> lru_;
  std::unordered_map<std::string_view, Entry> entries_;  // keys view text->key
};

}  // namespace pgwarden::pool
