// The LRU map of a server connection's prepared statements (transaction pooling).
#include "pool/server_statements.h"

namespace pgwarden::pool {

PreparedText::PreparedText(std::string_view text, const std::vector<uint32_t>& param_types)
    : sql(text), types(param_types) {
  key.reserve(types.size() * 4 + 1 + sql.size());
  for (const uint32_t t : types) {
    for (int shift = 24; shift >= 0; shift -= 8) key.push_back(static_cast<char>((t >> shift) & 0xff));
  }
  key.push_back('\0');
  key.append(sql);
}

const std::string* ServerStatements::find(const PreparedText& text) {
  const auto it = entries_.find(text.key);
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return &it->second.name;
}

const std::string& ServerStatements::add(std::shared_ptr<const PreparedText> text, std::string* evicted) {
  if (const auto it = entries_.find(text->key); it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.name;
  }
  if (entries_.size() >= capacity_ && !lru_.empty()) {
    const auto victim = entries_.find(lru_.back());
    if (evicted) *evicted = victim->second.name;
    lru_.pop_back();
    entries_.erase(victim);
  }
  const std::string_view key = text->key;
  lru_.push_front(key);
  Entry e{std::move(text), "pgwarden_s" + std::to_string(++next_), lru_.begin()};
  return entries_.emplace(key, std::move(e)).first->second.name;
}

void ServerStatements::erase(const PreparedText& text) {
  const auto it = entries_.find(text.key);
  if (it == entries_.end()) return;
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void ServerStatements::clear() {
  entries_.clear();
  lru_.clear();
}

}  // namespace pgwarden::pool
