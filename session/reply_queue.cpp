// The reply queue of a client session: what the server owes, the answers pgwarden gives in their
// turn, and the batch state (open, skipped to Sync) that decides which answers still come.
#include "session/reply_queue.h"

#include "protocol/messages.h"

namespace pgwarden::session {

ReplyQueue::Pending::Pending(Expect k) : kind(k) {
  switch (k) {
    case Expect::kParse:
    case Expect::kInternalParse:
      data.emplace<Statement>();
      break;
    case Expect::kBind:
      data.emplace<Bind>();
      break;
    case Expect::kDescribeStatement:
      data.emplace<DescribeStatement>();
      break;
    case Expect::kDescribePortal:
      data.emplace<DescribePortal>();
      break;
    case Expect::kExecute:
      data.emplace<Execute>();
      break;
    case Expect::kQuery:
      data.emplace<Query>();
      break;
    case Expect::kLocal:
      data.emplace<Local>();
      break;
    case Expect::kExplain:
      data.emplace<Explain>();
      break;
    case Expect::kInternal:
      data.emplace<Internal>();
      break;
    case Expect::kClose:
    case Expect::kSync:
    case Expect::kInternalClose:
      break;
  }
}

ReplyQueue::Pending::Write* ReplyQueue::Pending::write() {
  if (auto* q = std::get_if<Query>(&data)) return &q->write;
  if (auto* e = std::get_if<Execute>(&data)) return &e->write;
  return nullptr;
}

void ReplyQueue::insertBeforeLast(Pending p) {
  pending_.insert(pending_.empty() ? 0 : pending_.size() - 1, std::move(p));
}

void ReplyQueue::pop() {
  if (!pending_.empty()) pending_.pop_front();
}

bool ReplyQueue::answerLocal(std::string bytes, bool rfq, char tx_status, std::string& out) {
  if (pending_.empty()) {
    out.append(bytes);
    if (rfq) protocol::writeReadyForQuery(out, tx_status);
    return false;
  }
  Pending p(Expect::kLocal);
  p.local().bytes = std::move(bytes);
  p.local().rfq = rfq;
  pending_.push_back(std::move(p));
  return true;
}

void ReplyQueue::answerLastHere(std::string bytes, char tx_status, std::string& out) {
  Pending& last = pending_.back();
  last.answerHere(std::move(bytes));
  if (&pending_.front() == &last) emitLocalHeads(tx_status, out);
}

void ReplyQueue::emitLocalHeads(char tx_status, std::string& out) {
  while (!pending_.empty() && pending_.front().kind == Expect::kLocal) {
    const Pending::Local& local = pending_.front().local();
    out.append(local.bytes);
    if (local.rfq) protocol::writeReadyForQuery(out, tx_status);
    pending_.pop_front();
  }
}

void ReplyQueue::popAndEmit(char tx_status, std::string& out) {
  pop();
  emitLocalHeads(tx_status, out);
}

int ReplyQueue::rfqOwed() const {
  int n = 0;
  for (const auto& p : pending_) {
    n += (p.kind == Expect::kSync || p.kind == Expect::kQuery ||
          (p.kind == Expect::kInternal && p.internal().step_closes == 0) ||
          (p.kind == Expect::kExplain && p.explain().simple))
             ? 1
             : 0;
  }
  return n;
}

bool ReplyQueue::owedIsUncertain() const {
  bool batch_open = server_skipping_;
  for (const auto& p : pending_) {
    switch (p.kind) {
      case Expect::kSync:
        batch_open = false;
        break;
      case Expect::kParse:
      case Expect::kBind:
      case Expect::kDescribeStatement:
      case Expect::kDescribePortal:
      case Expect::kExecute:
      case Expect::kClose:
      case Expect::kInternalParse:
      case Expect::kInternalClose:
        batch_open = true;
        break;
      case Expect::kExplain:
        if (!p.explain().simple) {
          batch_open = true;
          break;
        }
        if (batch_open) return true;
        break;
      case Expect::kInternal:
        if (p.internal().sync) {
          batch_open = false;
          break;
        }
        if (p.internal().step_closes > 0) {
          batch_open = true;
          break;
        }
        if (batch_open) return true;
        break;
      case Expect::kQuery:
        if (batch_open) return true;
        break;
      case Expect::kLocal:
        break;
    }
  }
  return false;
}

bool ReplyQueue::unsyncedTail() const {
  if (server_skipping_) return true;
  for (size_t i = pending_.size(); i-- > 0;) {
    const Pending* it = &pending_[i];
    switch (it->kind) {
      case Expect::kInternal:
        if (it->internal().step_closes > 0) return true;
        return false;
      case Expect::kSync:
      case Expect::kQuery:
        return false;
      case Expect::kExplain:
        if (it->explain().simple) return false;
        return true;
      case Expect::kParse:
      case Expect::kBind:
      case Expect::kDescribeStatement:
      case Expect::kDescribePortal:
      case Expect::kExecute:
      case Expect::kClose:
      case Expect::kInternalParse:
      case Expect::kInternalClose:
        return true;
      case Expect::kLocal:
        break;
    }
  }
  // Extended messages whose responses all came (after a Flush) still leave the server waiting
  // for a Sync.
  return unsynced_;
}

bool ReplyQueue::running() const {
  for (const auto& p : pending_) {
    if (p.kind == Expect::kExecute || p.kind == Expect::kQuery || p.kind == Expect::kExplain) {
      return true;
    }
  }
  return false;
}

void ReplyQueue::batchMessage(protocol::Batch b) {
  switch (b) {
    case protocol::Batch::kOpens:
      unsynced_ = true;
      break;
    case protocol::Batch::kCloses:
      unsynced_ = false;
      break;
    case protocol::Batch::kNone:
      break;
  }
}

SkippedBatch& ReplyQueue::skipToSync(SkipCause cause, std::string_view sqlstate, size_t max_names,
                                     bool abort_at_sync) {
  const char* reason = "an earlier message in the same batch failed";
  switch (cause) {
    case SkipCause::kDenied:
      reason = "an earlier statement in the same batch was denied";
      deny_skipping_ = true;
      break;
    case SkipCause::kRefused:
      deny_skipping_ = true;
      break;
    case SkipCause::kServerError:
      server_skipping_ = true;
      break;
  }
  abort_at_sync_ = abort_at_sync_ || abort_at_sync;
  skipped_.begin(sqlstate, reason, max_names);
  return skipped_;
}

bool ReplyQueue::endSkip() {
  const bool abort = abort_at_sync_;
  deny_skipping_ = false;
  server_skipping_ = false;
  abort_at_sync_ = false;
  skipped_.end();
  return abort;
}

}  // namespace pgwarden::session
