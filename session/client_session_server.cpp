// Client session, proxying server -> client: each message the server sends, matched against
// what it still owes, screened, capped and passed on (or dropped) to the client.

#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "guards/codes.h"
#include "session/client_session.h"
#include "session/provenance.h"
#include "session/result_screen.h"
#include "session/statement_execution.h"

namespace pgwarden::session {

namespace {

// A tag with its count replaced ("SELECT 1001" -> "SELECT 1000").
std::string retag(std::string_view tag, int64_t count) {
  const auto sp = tag.rfind(' ');
  if (sp == std::string_view::npos) return std::string(tag);
  return std::string(tag.substr(0, sp + 1)) + std::to_string(count);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Proxying: server -> client
// ---------------------------------------------------------------------------------------------

void ClientSession::onServerMessage(pool::ServerConnection&, const protocol::Frame& f) {
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  if (!handleServerMessage(f)) return;
  if (pause_.reason() == PauseReason::kTxnState && replies_.empty()) {
    // The server has answered everything before the held message: judge it now.
    pause_.endTxnStateWait();
  }
  if (pause_.takeResume()) {
    // A write's savepoint is settled (or the held message may be judged): read what the client
    // sent meanwhile.
    resumeInput();
  }
  // A session shutting down ends once the statement it was running has finished.
  if (shutting_down_ && state_ == ClientState::kReady && replies_.empty()) {
    flushClient();
    terminate("57P01", "terminating connection: pgwarden is shutting down");
  }
}

void ClientSession::sendTruncationNotice(StatementRun& run) {
  if (run.notice_sent) return;
  run.notice_sent = true;
  if (run.plan && !run.plan->decision.truncation.message.empty()) {
    const auto& v = run.plan->decision.truncation;
    // The chain leaves the detail to be written here, when the cut has happened.
    const std::string detail = v.detail.empty() ? guards::truncationDetail(run.plan->decision.max_rows) : v.detail;
    protocol::writeNotice(client_->out(), "WARNING",
                          v.sqlstate.empty() ? std::string_view("01000") : v.sqlstate, v.message,
                          detail, v.hint);
    return;
  }
  std::string text = run.plan ? run.plan->decision.truncation_notice : std::string();
  if (text.empty()) {
    text = "The result was truncated at " + std::to_string(run.max_rows) +
           " rows. Add a WHERE clause or an aggregate to narrow it.";
  }
  protocol::writeNotice(client_->out(), "WARNING", "01000", text);
}

const guards::Verdict* ClientSession::sendScreenNotices(StatementRun& run, bool last) {
  // A denial replaces CommandComplete only where the client expects nothing after it but
  // ReadyForQuery (`last`); elsewhere it is sent as a warning.
  const ScreenFindings found = screenFindings(
      run, caller_.policy, [this] { return host_.tableStats(caller_.server_database); }, last);
  for (const guards::Verdict* v : found.warnings) {
    protocol::writeNotice(client_->out(), "WARNING", guards::codes::kSqlstateWarning, v->message,
                          v->detail, v->hint);
    ++host_.counters().warnings_sent;
  }
  return found.denial;
}

void ClientSession::sendCommandComplete(const protocol::Frame& f, StatementRun* run, int64_t rows,
                                        bool last) {
  auto cc = protocol::parseCommandComplete(f.body);
  const std::string_view tag = cc ? cc->tag : std::string_view();
  if (run && run->truncated) sendTruncationNotice(*run);
  const guards::Verdict* denial = run ? sendScreenNotices(*run, last) : nullptr;
  if (denial) {
    writeDeny(client_->out(), *denial);
    finishRun(*run, history::Outcome::kError, denial->sqlstate, denial->message);
    return;
  }
  if (run && run->truncated) {
    protocol::writeCommandComplete(client_->out(), retag(tag, rows));
  } else if (tag == "SET" && run && run->plan && run->plan->analysis &&
             run->index < run->plan->analysis->statements.size() &&
             run->plan->analysis->statements[run->index].kind == analysis::StatementKind::kReset) {
    protocol::writeCommandComplete(client_->out(), "RESET");  // a RESET sent as SET (resetSql)
  } else {
    client_->out().append(f.raw.data(), f.raw.size());
  }
  if (run) {
    noteCommandComplete(*run, tag, f.raw.size());
    if (tag.rfind("COPY", 0) == 0) run->rows_sent = protocol::commandTagCount(tag);
    if (tag == "SET" || tag == "RESET") noteCarriedSet(*run);
    finishRun(*run, history::Outcome::kOk);
  }
}

bool ClientSession::handleServerMessage(const protocol::Frame& f) {
  const protocol::Reply reply = protocol::backendMessage(f.type).reply;
  // Messages that may come at any time.
  if (reply == protocol::Reply::kAnyTime) {
    if (f.type == protocol::be::kNoticeResponse) {
      handleServerNotice(f);
    } else if (f.type == protocol::be::kParameterStatus) {
      handleServerParameterStatus(f);
    } else {
      client_->out().append(f.raw.data(), f.raw.size());  // NotificationResponse
    }
    return true;
  }
  emitLocalHeads();
  if (replies_.empty()) return handleServerUnsolicited(f);
  Pending& head = replies_.front();
  if (reply == protocol::Reply::kError) return handleServerError(f, head);

  // pgwarden's own statements and answers take whatever comes for them.
  switch (head.kind) {
    case Expect::kInternal:
      return handleServerInternal(f, head);
    case Expect::kLocal:
      return true;  // emitted above; cannot be the head here
    case Expect::kExplain:
      return handleExplainMessage(f, head);
    case Expect::kParse:
    case Expect::kBind:
    case Expect::kDescribeStatement:
    case Expect::kDescribePortal:
    case Expect::kExecute:
    case Expect::kClose:
    case Expect::kSync:
    case Expect::kQuery:
    case Expect::kInternalParse:
    case Expect::kInternalClose:
      break;
  }
  // The rest answer the client's messages: each type answers some kinds of entry.
  switch (reply) {
    case protocol::Reply::kStepDone:
      return handleServerParseBindCloseComplete(f, head);
    case protocol::Reply::kDescription:
      return handleServerDescription(f, head);
    case protocol::Reply::kRow:
      return handleServerDataRow(f, head);
    case protocol::Reply::kCommandDone:
      return handleServerCommandComplete(f, head);
    case protocol::Reply::kEmptyQuery:
      return handleServerEmptyQuery(f, head);
    case protocol::Reply::kSuspended:
      return handleServerPortalSuspended(f, head);
    case protocol::Reply::kCopy:
      return handleServerCopy(f, head);
    case protocol::Reply::kReady:
      return handleServerReadyForQuery(f, head);
    case protocol::Reply::kAnyTime:  // handled above
    case protocol::Reply::kError:
    case protocol::Reply::kUnknown:
    case protocol::Reply::kLogin:
    case protocol::Reply::kFunctionResult:
      break;
  }
  return serverOutOfOrder(f, head);
}

void ClientSession::handleServerNotice(const protocol::Frame& f) {
  if (!replies_.empty() && replies_.front().kind == Expect::kInternal) return;
  client_->out().append(f.raw.data(), f.raw.size());
}

void ClientSession::handleServerParameterStatus(const protocol::Frame& f) {
  // Recorded (and checked) by the server connection; the client sees it as it is, except
  // while attaching, when finishAttach sends the full set.
  if (state_ == ClientState::kReady) {
    // The carried settings' sync brings a connection to what this client already has: what the
    // server reports of it is no news to the client.
    const bool own_sync = !replies_.empty() && replies_.front().kind == Expect::kInternal &&
                          replies_.front().internal().param_sync;
    if (!own_sync) client_->out().append(f.raw.data(), f.raw.size());
    noteServerParameter(f);
  }
}

bool ClientSession::handleServerUnsolicited(const protocol::Frame& f) {
  if (f.type == protocol::be::kErrorResponse) {
    // A FATAL the server sends before it goes (administrator command, idle timeout).
    client_->out().append(f.raw.data(), f.raw.size());
    return true;
  }
  spdlog::error("{}: unexpected message '{}' from the server with nothing outstanding",
                logPrefix(), logsafe(f.type));
  terminate("08P01", "protocol error between pgwarden and the database; reconnect");
  return false;
}

bool ClientSession::handleServerError(const protocol::Frame& f, Pending& head) {
  std::string& out = client_->out();
  auto e = protocol::parseErrorFields(f.body);
  const std::string sqlstate = e ? std::string(e->sqlstate()) : std::string();
  const std::string message = e ? std::string(e->message()) : std::string();
  const int cls = metrics::sqlstateClass(sqlstate.data(), sqlstate.size());
  if (cls >= 0) ++host_.counters().server_errors_by_class[static_cast<size_t>(cls)];
  switch (head.kind) {
    case Expect::kInternal:
      if (head.writeStep() != WriteStep::kNone) return handleWriteStep(f, head);
      if (head.internal().abort_txn) return true;  // pgwarden's own error that aborts the block
      // A carried setting the server refused (attach, or the sync on a pooled connection): the
      // session ends at this statement's ReadyForQuery.
      head.internal().failed = true;
      head.internal().error = sqlstate.empty() ? message : sqlstate + "\x1f" + message;
      return true;
    case Expect::kQuery: {
      Pending::Query& q = head.query();
      q.write.failed = true;
      // The statement ends with the error; the ones after it in the same Query never run.
      if (q.exec) q.exec->error(sqlstate, message, f.raw.size());
      out.append(f.raw.data(), f.raw.size());
      return true;
    }
    case Expect::kSync:
      out.append(f.raw.data(), f.raw.size());
      return true;
    case Expect::kExplain:
      return handleExplainMessage(f, head);
    case Expect::kParse:
    case Expect::kBind:
    case Expect::kDescribeStatement:
    case Expect::kDescribePortal:
    case Expect::kExecute:
    case Expect::kClose:
    case Expect::kLocal:
    case Expect::kInternalParse:
    case Expect::kInternalClose:
      out.append(f.raw.data(), f.raw.size());
      afterServerError(sqlstate, message);
      // Report the failed statement with the server's words.
      return true;
  }
  return serverOutOfOrder(f, head);  // not an Expect
}

bool ClientSession::handleServerInternal(const protocol::Frame& f, Pending& head) {
  if (head.writeStep() != WriteStep::kNone) return handleWriteStep(f, head);
  if (f.type == protocol::be::kReadyForQuery) {
    auto z = protocol::parseReadyForQuery(f.body);
    if (z) server_.readyForQuery(z->status);
    const bool param_sync = head.internal().param_sync;
    const bool abort_txn = head.internal().abort_txn;
    const bool failed = head.internal().failed;
    const std::string error = std::move(head.internal().error);
    replies_.pop();
    if (abort_txn || (param_sync && !failed)) {
      emitLocalHeads();
      return true;
    }
    if (failed) {
      // A client parameter the server rejected (a bad TimeZone...): PostgreSQL refuses the
      // connection in that case; so do we, with the server's reason.
      std::string sqlstate = "22023";
      std::string message = error;
      const auto sep = error.find('\x1f');
      if (sep != std::string::npos) {
        sqlstate = error.substr(0, sep);
        message = error.substr(sep + 1);
      }
      fatal(sqlstate, message, metrics::RejectReason::kNotAllowed);
      return false;
    }
    finishAttach();
    return state_ == ClientState::kReady;
  }
  return true;  // CommandComplete of the SETs
}

bool ClientSession::handleServerParseBindCloseComplete(const protocol::Frame& f, Pending& head) {
  // Each answers its own kind of entry; pgwarden's own Parse and Close are not passed on.
  const bool clients = (f.type == protocol::be::kParseComplete && head.kind == Expect::kParse) ||
                       (f.type == protocol::be::kBindComplete && head.kind == Expect::kBind) ||
                       (f.type == protocol::be::kCloseComplete && head.kind == Expect::kClose);
  const bool ours =
      (f.type == protocol::be::kParseComplete && head.kind == Expect::kInternalParse) ||
      (f.type == protocol::be::kCloseComplete && head.kind == Expect::kInternalClose);
  if (!clients && !ours) return serverOutOfOrder(f, head);
  if (clients) client_->out().append(f.raw.data(), f.raw.size());
  popPending();
  return true;
}

bool ClientSession::handleServerDescription(const protocol::Frame& f, Pending& head) {
  std::string& out = client_->out();
  if (f.type == protocol::be::kRowDescription && head.kind == Expect::kQuery) {
    head.rows_this_execute = 0;
    if (StatementRun* run = head.current()) run->bytes_sent += static_cast<int64_t>(f.raw.size());
    relayRowDescription(f, true, true);
    return true;
  }
  if (f.type == protocol::be::kParameterDescription && head.kind == Expect::kDescribeStatement &&
      !head.describeStatement().described) {
    head.describeStatement().described = true;
    out.append(f.raw.data(), f.raw.size());
    return true;
  }
  // A Describe ends with its RowDescription or NoData.
  const bool describe =
      head.kind == Expect::kDescribeStatement || head.kind == Expect::kDescribePortal;
  if (describe && (f.type == protocol::be::kRowDescription || f.type == protocol::be::kNoData)) {
    const bool portal = head.kind == Expect::kDescribePortal;
    const bool ours = portal && head.describePortal().ours;  // not the client's: not relayed
    if (f.type == protocol::be::kRowDescription) {
      relayRowDescription(f, portal, !ours);
    } else {
      if (portal) row_mask_ = {};
      if (!ours) out.append(f.raw.data(), f.raw.size());
    }
    popPending();
    return true;
  }
  return serverOutOfOrder(f, head);
}

void ClientSession::relayRowDescription(const protocol::Frame& f, bool rows, bool relay) {
  const guards::Masking* masking = caller_.policy ? caller_.policy->masking() : nullptr;
  guards::RowMask mask;
  if (masking) mask = masking->rowMask(f.body, host_.tableStats(caller_.server_database).get());
  if (relay && mask.any) {
    guards::appendMaskedRowDescription(client_->out(), f.body, mask);
  } else if (relay) {
    client_->out().append(f.raw.data(), f.raw.size());
  }
  if (rows) row_mask_ = std::move(mask);
}

void ClientSession::describeForMasking(std::string_view portal) {
  if (!caller_.policy || !caller_.policy->masking() || !server_) return;
  Pending d(Expect::kDescribePortal);
  d.describePortal().ours = true;
  replies_.push(std::move(d));
  protocol::writeDescribe(server_->out(), 'P', portal);
}

bool ClientSession::handleServerDataRow(const protocol::Frame& f, Pending& head) {
  if (head.kind != Expect::kExecute && head.kind != Expect::kQuery) return serverOutOfOrder(f, head);
  StatementRun* run = head.current();
  // Beyond the plan's row cap the row is held back: the client gets max_rows rows.
  if (run && !countDataRow(*run, f, run->max_rows)) return true;
  if (row_mask_.any && caller_.policy && caller_.policy->masking()) {
    guards::appendMaskedDataRow(client_->out(), f.body, row_mask_, *caller_.policy->masking());
  } else {
    client_->out().append(f.raw.data(), f.raw.size());
  }
  ++head.rows_this_execute;
  ++host_.counters().rows_returned;
  return true;
}

bool ClientSession::handleServerCommandComplete(const protocol::Frame& f, Pending& head) {
  if (head.kind != Expect::kExecute && head.kind != Expect::kQuery) return serverOutOfOrder(f, head);
  StatementRun* run = head.current();
  // Not in a guarded write session: the probe sees committed rows, not the session's own writes.
  if (run && server_ && !writes_ && probeWanted(*run, caller_.policy)) {
    // The screens' probe answers before the client hears of the statement's end: this message
    // is handed over again once it has (statement_execution.h holdForProbe).
    if (!probe_)
      probe_ = std::make_unique<ScreenProbe>(host_.loop(), host_.pools(), host_.counters());
    if (holdForProbe(*run, caller_.policy, host_.tableStats(caller_.server_database).get(),
                     *probe_, caller_.server_database, *server_.conn(), [this] {
                       if (server_) server_->releaseInput();
                     }))
      return true;
  }
  if (!writes_ || !writesCommandComplete(f, head)) {
    sendCommandComplete(f, run, head.rows_this_execute, lastOfText(head));
  }
  if (run && provenanceOn(caller_.provenance())) {
    protocol::writeNotice(client_->out(), "NOTICE", "00000", "pgwarden provenance",
                          provenanceDetail(*run, host_.tableStats(caller_.server_database).get()));
  }
  if (head.kind == Expect::kQuery) {
    head.rows_this_execute = 0;
    // Recorded by now, or held for its count (hold_.counted()): the next statement's run starts.
    if (TextExecution* exec = head.query().exec.get()) (void)exec->detach();
    return true;
  }
  popPending();
  return true;
}

bool ClientSession::handleServerEmptyQuery(const protocol::Frame& f, Pending& head) {
  if (head.kind != Expect::kExecute && head.kind != Expect::kQuery) return serverOutOfOrder(f, head);
  client_->out().append(f.raw.data(), f.raw.size());
  if (head.kind == Expect::kQuery) {
    if (TextExecution* exec = head.query().exec.get()) exec->finish(history::Outcome::kOk);
    return true;
  }
  if (head.run && !head.run->finished) finishRun(*head.run, history::Outcome::kOk);
  popPending();
  return true;
}

bool ClientSession::handleServerPortalSuspended(const protocol::Frame& f, Pending& head) {
  if (head.kind != Expect::kExecute) return serverOutOfOrder(f, head);
  std::string& out = client_->out();
  StatementRun* run = head.run.get();
  if (run && run->truncated) {
    // The cap is reached: end the portal for the client here.
    sendTruncationNotice(*run);
    sendScreenNotices(*run, false);  // an Execute: a finding warns
    protocol::writeCommandComplete(out, "SELECT " + std::to_string(head.rows_this_execute));
    finishRun(*run, history::Outcome::kOk);
  } else {
    out.append(f.raw.data(), f.raw.size());
    // Its portal was replaced or closed while this Execute was in flight: nothing
    // else holds the run to finish it later.
    if (run && !run->finished && head.run.use_count() == 1) {
      finishRun(*run, history::Outcome::kOk);
    }
  }
  popPending();
  return true;
}

bool ClientSession::handleServerCopy(const protocol::Frame& f, Pending& head) {
  if (head.kind != Expect::kExecute && head.kind != Expect::kQuery) return serverOutOfOrder(f, head);
  if (f.type == protocol::be::kCopyInResponse) {
    // COPY FROM STDIN writes; the read-only session refuses it too, this is the clean way
    // out if the server ever gets that far. The server answers with an ErrorResponse.
    protocol::writeCopyFail(server_->out(),
                            "COPY FROM STDIN is not allowed through pgwarden");
    flushServer();
    return true;
  }
  if (f.type == protocol::be::kCopyBothResponse) {
    terminate("08P01", "COPY BOTH (replication) is not supported through pgwarden");
    return false;
  }
  // CopyOutResponse, CopyData, CopyDone: COPY ... TO STDOUT streams through.
  if (StatementRun* run = head.current()) run->bytes_sent += static_cast<int64_t>(f.raw.size());
  client_->out().append(f.raw.data(), f.raw.size());
  return true;
}

bool ClientSession::handleServerReadyForQuery(const protocol::Frame& f, Pending& head) {
  if (head.kind != Expect::kSync && head.kind != Expect::kQuery) return serverOutOfOrder(f, head);
  const auto z = takeReadyForQuery(f);
  if (!z) return false;
  if (StatementRun* run = head.current(); run && !run->finished && head.kind == Expect::kQuery) {
    finishRun(*run, history::Outcome::kOk);
  }
  // Portals end with their transaction.
  if (z->status != 'T') finishPortals();
  if (writes_ && writesReadyForQuery(z->status, head)) return true;
  client_->out().append(f.raw.data(), f.raw.size());
  popPending();
  return true;
}

bool ClientSession::serverOutOfOrder(const protocol::Frame& f, const Pending& head) {
  spdlog::error("{}: out-of-order message '{}' from the server (expected a response to entry {})",
                logPrefix(), logsafe(f.type), static_cast<int>(head.kind));
  terminate("08P01", "protocol error between pgwarden and the database; reconnect");
  return false;
}

std::optional<protocol::ReadyForQueryMsg> ClientSession::takeReadyForQuery(const protocol::Frame& f) {
  auto z = protocol::parseReadyForQuery(f.body);
  if (!z) {
    terminate("08P01", "protocol error between pgwarden and the database; reconnect");
    return std::nullopt;
  }
  server_.readyForQuery(z->status);
  return *z;
}

void ClientSession::afterServerError(const std::string& sqlstate, const std::string& message) {
  // After an error in an extended-protocol message the server skips everything up to Sync:
  // drop what we expected for those messages, undoing their bookkeeping. The statement the
  // error belongs to gets one record with the server's SQLSTATE (its Execute's, or, when the
  // Parse or Bind failed, one of its own); later Executes in the batch were never run.
  std::shared_ptr<const StatementPlan> failed_plan;
  guards::AgentOverrides failed_overrides;
  bool failed_recorded = false;
  bool first = true;
  // The failed Parse's statement name or Bind's portal: the client's later messages up to Sync
  // that name it refer to a statement whose record is this failure's.
  std::optional<std::string> failed_statement;
  std::optional<std::string> failed_portal;
  const auto skipRest = [&] {
    if (!replies_.empty()) return;
    SkippedBatch& skipped =
        replies_.skipToSync(ReplyQueue::SkipCause::kServerError, sqlstate,
                            static_cast<size_t>(config_->limits.max_prepared_statements));
    if (failed_statement) skipped.statement(*failed_statement, {failed_plan, true});
    if (failed_portal) skipped.portal(*failed_portal, {failed_plan, true});
  };
  const auto recordFailure = [&] {
    if (failed_plan && !failed_recorded) {
      failed_recorded = true;
      auto run = startRun(failed_plan, 0, true);
      run->overrides = failed_overrides;
      finishRun(*run, outcomeForError(sqlstate), sqlstate, message);
    }
  };
  while (!replies_.empty()) {
    Pending& p = replies_.front();
    if (p.kind == Expect::kSync) break;
    if (p.kind == Expect::kQuery) {
      // A simple Query sent inside the unfinished batch: the server skips it too (it ignores
      // every message up to Sync) and owes it no ReadyForQuery. Each of its statements gets
      // its record.
      if (TextExecution* exec = p.query().exec.get())
        exec->finishRest(history::Outcome::kError, sqlstate, kNotExecutedInBatch);
      first = false;
      replies_.pop();
      continue;
    }
    if (first) {
      if (p.kind == Expect::kParse) {
        const std::string& name = p.statement().name;
        failed_statement = name;
        failed_plan = prepared_.plan(name);
        if (const guards::AgentOverrides* ov = prepared_.overrides(name)) {
          failed_overrides = *ov;
        }
      } else if (p.kind == Expect::kBind) {
        failed_plan = p.bind().plan;
        failed_portal = p.bind().name;
      } else if (p.kind == Expect::kExecute && p.run && !p.run->finished) {
        finishRun(*p.run, outcomeForError(sqlstate), sqlstate, message);
        failed_recorded = true;
      }
    } else if (p.kind == Expect::kExecute && p.run && !p.run->finished) {
      if (failed_plan && !failed_recorded && p.run->plan == failed_plan) {
        failed_recorded = true;
        finishRun(*p.run, outcomeForError(sqlstate), sqlstate, message);
      } else {
        finishRun(*p.run, history::Outcome::kError, sqlstate, kNotExecutedInBatch);
      }
    }
    first = false;
    server_.forgetFailedParse(p);
    if (p.kind == Expect::kParse) {
      const Pending::Statement& st = p.statement();
      prepared_.restore(st.name, {st.previous, st.had_previous});
    }
    const bool explain = p.kind == Expect::kExplain;
    replies_.pop();
    if (explain && gate_ && gate_->waiting()) {
      recordFailure();
      // The server skips our EXPLAIN (or parse check) with the rest of the batch; the paused
      // message goes the same way (everything up to Sync is ignored), noted as skipped like the
      // client's messages after it, so a later Execute of its statement is recorded as its own.
      const std::string paused = pause_.message();
      cancelWaits();
      skipRest();
      if (paused.size() >= 5 && replies_.skipped().active()) {
        noteSkipped(protocol::Frame{paused[0], paused, std::string_view(paused).substr(5)});
      }
      resumeInput();
      return;
    }
  }
  recordFailure();
  skipRest();
}

void ClientSession::onServerChunk(pool::ServerConnection&, char type, std::string_view bytes,
                                  bool first, bool last) {
  if (state_ != ClientState::kReady) return;
  if (first) {
    client_.setChunkForward(true);
    chunk_run_.reset();
    emitLocalHeads();
    if (type == protocol::be::kDataRow && !replies_.empty() &&
        (replies_.front().kind == Expect::kExecute || replies_.front().kind == Expect::kQuery)) {
      Pending& head = replies_.front();
      chunk_run_ = head.currentShared();
      if (chunk_run_ && chunk_run_->max_rows >= 0 && chunk_run_->rows_sent >= chunk_run_->max_rows) {
        chunk_run_->truncated = true;
        client_.setChunkForward(false);
      } else {
        ++head.rows_this_execute;
        ++host_.counters().rows_returned;
        if (chunk_run_) ++chunk_run_->rows_sent;
      }
    }
  }
  if (client_.chunkForward()) {
    client_->out().append(bytes.data(), bytes.size());
    if (chunk_run_) chunk_run_->bytes_sent += static_cast<int64_t>(bytes.size());
    flushClient();
    updateBackpressure();
  }
  if (last) chunk_run_.reset();
}

void ClientSession::onServerReadDone(pool::ServerConnection&) {
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  flushClient();
  updateBackpressure();
  returnServerIfIdle();
}

void ClientSession::onServerWritten(pool::ServerConnection&) {
  if (client_.clientPaused()) updateBackpressure();
}

void ClientSession::onStreamWritten(net::Stream&, int status) {
  if (status != 0) {
    closeSession("write to the client failed");
    return;
  }
  if (client_.serverPaused()) updateBackpressure();
}

void ClientSession::onServerLost(pool::ServerConnection& s, const std::string& why) {
  (void)server_.detach();
  client_.serverGone();
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  // The statement did not fail on the server: pgwarden lost the connection it ran on.
  if (s.readOnlyLost()) {
    finishAllPending(history::Outcome::kAborted,
                     "pgwarden ended the session: the server's read-only setting was turned off",
                     "25006");
    spdlog::warn("{}: ending the session: {}", logPrefix(), logsafe(why, kLogMessageMaxBytes));
    fatal("25006",
          "terminating connection: the server reported default_transaction_read_only=off, and "
          "pgwarden only runs read-only sessions; reconnect and leave that setting alone",
          metrics::RejectReason::kNotAllowed);
    return;
  }
  if (!s.lexicalLost().empty()) {
    finishAllPending(history::Outcome::kAborted,
                     "pgwarden ended the session: the server reported " + s.lexicalLost(), "0A000");
    spdlog::warn("{}: ending the session: {}", logPrefix(), logsafe(why, kLogMessageMaxBytes));
    fatal("0A000",
          "terminating connection: the server reported " + s.lexicalLost() +
              ", and pgwarden reads statements only with standard_conforming_strings=on and "
              "client_encoding=UTF8; reconnect and leave those settings as they are",
          metrics::RejectReason::kNotAllowed);
    return;
  }
  finishAllPending(history::Outcome::kAborted,
                   "the server connection was lost before the statement finished", "08006");
  spdlog::warn("{}: server connection lost: {}", logPrefix(), logsafe(why, kLogMessageMaxBytes));
  fatal("08006",
        "the connection to the database was lost; reconnect and try again",
        metrics::RejectReason::kUnreachable);
}

}  // namespace pgwarden::session
