// Server connection, logging in: the startup packet with the safety settings, the answers to the
// server's authentication requests, what the login reports, and the write pool's check of its role.
// Login flow: https://www.postgresql.org/docs/15/protocol-flow.html#id-1.10.6.7.3
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_text.h"
#include "guards/fixed_settings.h"
#include "pool/server_conn.h"

namespace pgwarden::pool {

namespace {

std::string millisText(net::Millis m) { return std::to_string(m.count()); }

}  // namespace

void ServerConnection::sendStartup() {
  const auto& up = config_->upstream;
  // The write pool's connections may write (default_transaction_read_only off, as their reset
  // value) and may sit in a transaction as long as the longest transaction_idle_timeout of the
  // write groups: pgwarden rolls idle transactions back itself; the server's timeout is the
  // backstop a little later.
  auto idle_in_txn = up.idle_in_transaction_session_timeout;
  if (pool_.writes()) idle_in_txn = std::max(idle_in_txn, config_->write_idle_in_transaction);
  std::vector<std::pair<std::string, std::string>> params = {
      {"user", pool_.role()},
      {"database", pool_.database()},
      {"application_name", "pgwarden"},
      // Sent in the startup packet so they are this session's reset values: DISCARD ALL and
      // RESET ALL bring them back, and no client SET survives a reset.
      {"default_transaction_read_only", pool_.writes() ? "off" : "on"},
      {"statement_timeout", millisText(up.statement_timeout)},
      {"lock_timeout", millisText(up.lock_timeout)},
      {"idle_in_transaction_session_timeout", millisText(idle_in_txn)},
      // The lexical settings pgwarden reads every text under (guards/fixed_settings.h), as
      // reset values too, whatever the role's or the database's defaults say.
      {"standard_conforming_strings", std::string(guards::kStandardConformingStrings)},
      {"client_encoding", std::string(guards::kClientEncoding)},
  };
  protocol::writeStartup(stream_.out(), params);
  if (stream_.flush() != 0) fail("cannot write to the server");
}

bool ServerConnection::handleLoginMessage(const protocol::Frame& f) {
  if (role_check_ == RoleCheck::kAsked) return handleRoleCheck(f);
  switch (f.type) {
    case protocol::be::kAuthentication:
      return handleAuthRequest(f);
    case protocol::be::kParameterStatus:
      return handleLoginParameter(f);
    case protocol::be::kBackendKeyData:
      return handleBackendKeyData(f);
    case protocol::be::kNoticeResponse:
    case protocol::be::kNegotiateProtocolVersion:  // we asked for 3.0 with no options
      return true;
    case protocol::be::kErrorResponse:
      return handleLoginError(f);
    case protocol::be::kReadyForQuery:
      return handleLoginReady(f);
    default:
      fail(std::string("unexpected message '") + f.type + "' from the server during login");
      return false;
  }
}

bool ServerConnection::handleAuthRequest(const protocol::Frame& f) {
  const auto& up = config_->upstream;
  const std::string& password = pool_.writes() ? up.write_password : up.password;
  const std::string& password_file = pool_.writes() ? up.write_password_file : up.password_file;
  auto r = protocol::parseAuthRequest(f.body);
  if (!r) {
    fail("malformed authentication request from the server");
    return false;
  }
  const bool needs_password = r->code == 3 || r->code == 5 || r->code == 10;
  if (needs_password && password.empty()) {
    failLogin(metrics::ConnectFailure::kAuthFailed, password_file.empty()
             ? "the server asks for a password and none is configured (upstream.password "
               "or upstream.password_file, upstream.write_password[_file] for the write pool)"
             : "the server asks for a password and " + password_file +
                   " could not be read when the config was loaded");
    return false;
  }
  switch (r->code) {
    case 0:
      break;
    case 3:
      protocol::writePassword(stream_.out(), password);
      break;
    case 5: {
      if (r->data.size() != 4) {
        fail("malformed md5 salt from the server");
        return false;
      }
      uint8_t salt[4];
      for (int i = 0; i < 4; ++i) salt[i] = static_cast<uint8_t>(r->data[i]);
      protocol::writePassword(stream_.out(),
                              protocol::md5PasswordResponse(pool_.role(), password, salt));
      break;
    }
    case 10:
    case 11:
    case 12:
      if (!answerSasl(*r, password)) return false;
      break;
    default:
      failLogin(metrics::ConnectFailure::kAuthFailed,
                "the server asks for authentication method " + std::to_string(r->code) +
           ", which pgwarden does not support (use scram-sha-256, md5, password or trust)");
      return false;
  }
  if (stream_.flush() != 0) {
    fail("cannot write to the server");
    return false;
  }
  return true;
}

bool ServerConnection::answerSasl(const protocol::AuthRequest& r, const std::string& password) {
  if (r.code == 10) {
    bool has = false;
    for (auto m : r.mechanisms) has = has || m == "SCRAM-SHA-256";
    if (!has) {
      fail("the server offers no SASL mechanism pgwarden supports");
      return false;
    }
    scram_ = std::make_unique<protocol::ScramClient>(pool_.role(), password);
    protocol::writeSaslInitial(stream_.out(), "SCRAM-SHA-256", scram_->clientFirst());
    return true;
  }
  if (r.code == 11) {
    if (!scram_) {
      fail("unexpected SASL continuation from the server");
      return false;
    }
    auto final_msg = scram_->handleServerFirst(r.data);
    if (!final_msg) {
      failLogin(metrics::ConnectFailure::kAuthFailed,
                "SCRAM exchange with the server failed: " + final_msg.error());
      return false;
    }
    protocol::writeSaslResponse(stream_.out(), *final_msg);
    return true;
  }
  // 12: the SASL final message.
  if (!scram_) {
    fail("unexpected SASL final message from the server");
    return false;
  }
  auto st = scram_->verifyServerFinal(r.data);
  scram_.reset();
  if (!st) {
    failLogin(metrics::ConnectFailure::kAuthFailed, "the server's SCRAM signature does not verify");
    return false;
  }
  return true;
}

bool ServerConnection::handleLoginParameter(const protocol::Frame& f) {
  auto p = protocol::parseParameterStatus(f.body);
  if (!p) {
    fail("malformed ParameterStatus from the server");
    return false;
  }
  noteParameter(p->name, p->value);
  return true;
}

bool ServerConnection::handleBackendKeyData(const protocol::Frame& f) {
  auto k = protocol::parseBackendKeyData(f.body);
  if (!k) {
    fail("malformed BackendKeyData from the server");
    return false;
  }
  backend_pid_ = k->pid;
  backend_key_ = k->key;
  return true;
}

bool ServerConnection::handleLoginError(const protocol::Frame& f) {
  auto e = protocol::parseErrorFields(f.body);
  if (e) {
    login_sqlstate_ = std::string(e->sqlstate());
    // The server's own words, for the clients waiting on this login; bounded.
    login_message_ = std::string(e->message().substr(0, kMaxLoginMessage));
    metrics::ConnectFailure kind = metrics::ConnectFailure::kOther;
    if (login_sqlstate_ == "53300") kind = metrics::ConnectFailure::kTooManyConnections;
    if (login_sqlstate_ == "28P01" || login_sqlstate_ == "28000") {
      kind = metrics::ConnectFailure::kAuthFailed;
    }
    failLogin(kind, "the server refused the login: " + login_sqlstate_ + " " +
                        login_message_);
  } else {
    fail("the server refused the login");
  }
  return false;
}

bool ServerConnection::handleLoginReady(const protocol::Frame& f) {
  auto z = protocol::parseReadyForQuery(f.body);
  if (!z) {
    fail("malformed ReadyForQuery from the server");
    return false;
  }
  tx_status_ = z->status;
  for (const std::string_view name : {"standard_conforming_strings", "client_encoding"}) {
    // As for the read-only check below: a server that does not report a setting is taken at
    // the startup packet's word (every PostgreSQL since 8.1 reports both).
    if (!parameter(name).empty() && !guards::serverReportAccepted(name, parameter(name))) {
      fail("the server connection does not read texts as pgwarden does (" + std::string(name) +
           "=" + std::string(parameter(name)) + ")");
      return false;
    }
  }
  if (pool_.writes()) return askRoleCheck();
  const auto ro = parameter("default_transaction_read_only");
  if (!ro.empty() && ro != "on") {
    fail("the server connection is not read-only (default_transaction_read_only=" +
         std::string(ro) + ")");
    return false;
  }
  loginDone();
  return true;
}

void ServerConnection::loginDone() {
  params_ = pool_.shareParams(std::move(params_));
  login_params_ = params_;
  setState(ServerState::kIdle);
  idle_since_ms_ = pool_.manager().nowMs();
  pool_.onLoginDone(*this);
}

// The write pool's role must not be a superuser, nor a member of one (it could SET ROLE to it), nor
// bypass row security: pgwarden's write mode counts and caps what a statement changes, it does not
// replace the role's privileges. Asked once per connection, before it is lent, on the loop.
bool ServerConnection::askRoleCheck() {
  role_check_ = RoleCheck::kAsked;
  role_refused_ = false;
  role_answered_ = false;
  protocol::writeQuery(stream_.out(),
                       "SELECT r.rolsuper OR r.rolbypassrls OR EXISTS (SELECT 1 FROM pg_roles s "
                       "WHERE s.rolsuper AND pg_has_role(r.oid, s.oid, 'MEMBER')) FROM pg_roles r "
                       "WHERE r.rolname = current_user");
  if (stream_.flush() != 0) {
    fail("cannot write to the server");
    return false;
  }
  return true;
}

bool ServerConnection::handleRoleCheck(const protocol::Frame& f) {
  switch (f.type) {
    case protocol::be::kDataRow: {
      auto cells = protocol::parseDataRowValues(f.body);
      role_refused_ = !cells || cells->size() != 1 || !(*cells)[0] || *(*cells)[0] != "f";
      role_answered_ = true;
      return true;
    }
    case protocol::be::kRowDescription:
    case protocol::be::kCommandComplete:
    case protocol::be::kNoticeResponse:
    case protocol::be::kParameterStatus:
      return true;
    case protocol::be::kErrorResponse:
      role_refused_ = true;
      return true;
    case protocol::be::kReadyForQuery: {
      role_check_ = RoleCheck::kDone;
      if (role_refused_ || !role_answered_) {
        login_sqlstate_ = "42501";
        login_message_ = "pgwarden refuses the write role \"" + pool_.role() +
                         "\": it is a superuser, a member of one, or bypasses row security (or "
                         "the check could not run); configure upstream.write_user as a plain role "
                         "with only the grants the agents need";
        spdlog::critical("write pool db={}: {}", logsafe(pool_.database()), login_message_);
        failLogin(metrics::ConnectFailure::kAuthFailed, login_message_);
        return false;
      }
      loginDone();
      return true;
    }
    default:
      fail(std::string("unexpected message '") + f.type + "' from the server during the role check");
      return false;
  }
}

}  // namespace pgwarden::pool
