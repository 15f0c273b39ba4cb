// The server side of a client session: the connection it holds and, under transaction pooling,
// its prepared statements carried from one connection to the next.
#include "session/pooled_server.h"

#include <atomic>
#include <utility>

#include "protocol/messages.h"

namespace pgwarden::session {

namespace {

// Tags of unnamed statements: which client's text a connection's unnamed statement holds.
// Unique in the process (every loop's sessions draw from it).
uint64_t nextUnnamedTag() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

void PooledServer::attach(pool::ServerConnection& c) {
  conn_ = &c;
  tx_status_ = c.txStatus();
}

pool::ServerConnection* PooledServer::detach() { return std::exchange(conn_, nullptr); }

void PooledServer::readyForQuery(char status) {
  tx_status_ = status;
  if (conn_) conn_->setTxStatus(status);
}

bool PooledServer::hasStatement(std::string_view name) const {
  return !name.empty() && texts_.count(std::string(name)) > 0;
}

bool PooledServer::parse(std::string_view name, std::string_view sql,
                         const std::vector<uint32_t>& types, ReplyQueue& replies) {
  auto text = std::make_shared<const pool::PreparedText>(sql, types);
  if (name.empty()) {
    unnamed_text_ = std::move(text);
    unnamed_tag_ = nextUnnamedTag();
    conn_->setUnnamedOwner(unnamed_tag_);
    protocol::writeParse(conn_->out(), "", sql, types);
    return true;
  }
  texts_[std::string(name)] = text;
  if (conn_->statements().find(*text)) return false;  // the connection holds it already
  prepare(std::move(text), false, replies);
  return true;
}

const std::string& PooledServer::prepare(std::shared_ptr<const pool::PreparedText> text,
                                         bool internal, ReplyQueue& replies) {
  using Expect = ReplyQueue::Expect;
  std::string evicted;
  std::string& out = conn_->out();
  const std::string& name = conn_->statements().add(text, &evicted);
  if (!evicted.empty()) {
    protocol::writeClose(out, 'S', evicted);
    replies.insertBeforeLast(ReplyQueue::Pending(Expect::kInternalClose));
  }
  protocol::writeParse(out, name, text->sql, text->types);
  if (internal) {
    ReplyQueue::Pending p(Expect::kInternalParse);
    p.statement().server_text = std::move(text);
    replies.insertBeforeLast(std::move(p));
  } else {
    replies.back().statement().server_text = std::move(text);  // the client's own Parse
  }
  return name;
}

const std::string* PooledServer::serverStatement(std::string_view name, ReplyQueue& replies) {
  static const std::string kUnnamed;
  if (name.empty()) {
    if (unnamed_text_ && conn_->unnamedOwner() != unnamed_tag_) {
      // The connection's unnamed statement is not this client's (it moved connections since).
      protocol::writeParse(conn_->out(), "", unnamed_text_->sql, unnamed_text_->types);
      replies.insertBeforeLast(ReplyQueue::Pending(ReplyQueue::Expect::kInternalParse));
      conn_->setUnnamedOwner(unnamed_tag_);
    }
    return &kUnnamed;
  }
  const auto it = texts_.find(std::string(name));
  if (it == texts_.end()) return nullptr;  // the server says it does not exist
  if (const std::string* held = conn_->statements().find(*it->second)) return held;
  return &prepare(it->second, true, replies);
}

void PooledServer::closeStatement(std::string_view name) {
  if (name.empty()) {
    unnamed_text_.reset();
  } else {
    texts_.erase(std::string(name));
  }
}

void PooledServer::forgetFailedParse(const ReplyQueue::Pending& p) {
  using Expect = ReplyQueue::Expect;
  if (!txn_pooling_ || !conn_) return;
  if (p.kind != Expect::kInternalParse && p.kind != Expect::kParse) return;
  const ReplyQueue::Pending::Statement& st = p.statement();
  if (st.server_text) conn_->statements().erase(*st.server_text);
  conn_->setUnnamedOwner(0);
  // The client's Parse failed (or was skipped): as on the server, the name does not exist.
  if (p.kind == Expect::kParse) closeStatement(st.name);
}

}  // namespace pgwarden::session
