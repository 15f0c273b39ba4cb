// The commands the command line runs. Logging goes to stderr (journald-aware) so pgwarden runs
// under systemd as a plain foreground process.
#include <spdlog/spdlog.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <iostream>

#include "daemon/cli.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/salt_key.h"
#include "daemon/systemd_notify.h"
#include "history/chain.h"
#include "history/verify.h"
#include "mcp/token_auth.h"
#include "pgwarden_version.h"
#include "protocol/auth.h"

namespace pgwarden::daemon {

int checkConfigCommand(const std::string& path, std::ostream& out, std::ostream& err) {
  try {
    auto cfg = loadConfig(path);
    for (const auto& w : cfg->warnings) err << "warning: " << w << "\n";
    if (const std::string w = checkSaltKey(cfg->auth); !w.empty()) err << "warning: " << w << "\n";
    if (const std::string p = giveMaskKey(*cfg, false); !p.empty()) {
      err << path << ": " << p << "\n";
      return 1;
    }
    if (cfg->history.chain && cfg->history.store != "off") {
      // The daemon refuses to start without the chain's key: so does the check.
      if (const std::string p = history::chainKeyProblem(cfg->history.chain_key_file); !p.empty()) {
        err << path << ": history.chain_key_file: " << p << "\n";
        return 1;
      }
    }
    out << path << ": ok (" << cfg->users.size() << " user" << (cfg->users.size() == 1 ? "" : "s")
        << ", " << cfg->groups.size() << " group" << (cfg->groups.size() == 1 ? "" : "s") << ")\n";
    return 0;
  } catch (const std::exception& e) {
    err << e.what() << "\n";
    return 1;
  }
}

namespace {

std::string readPassword(const std::string& user, std::ostream& err, bool& ok) {
  ok = false;
  std::string line;
  if (isatty(STDIN_FILENO)) {
    err << "Password for " << user << ": " << std::flush;
    termios old_t{};
    const bool have_t = tcgetattr(STDIN_FILENO, &old_t) == 0;
    if (have_t) {
      termios t = old_t;
      t.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      tcsetattr(STDIN_FILENO, TCSAFLUSH, &t);
    }
    ok = static_cast<bool>(std::getline(std::cin, line));
    if (have_t) tcsetattr(STDIN_FILENO, TCSAFLUSH, &old_t);
    err << "\n";
  } else {
    ok = static_cast<bool>(std::getline(std::cin, line));
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  return line;
}

}  // namespace

int passwdCommand(const std::string& user, std::ostream& out, std::ostream& err) {
  bool ok = false;
  std::string password = readPassword(user, err, ok);
  if (!ok || password.empty()) {
    err << "pgwarden passwd: no password given on stdin\n";
    return 1;
  }
  const std::string verifier = protocol::makeScramVerifier(password);
  // Overwrite our copy; the verifier is all that leaves this function.
  std::fill(password.begin(), password.end(), '\0');
  out << verifier << "\n";
  return 0;
}

int tokenCommand(const std::string& user, std::ostream& out, std::ostream& err) {
  const std::string token = mcp::generateToken();
  if (token.empty()) {
    err << "pgwarden token: no random bytes available\n";
    return 1;
  }
  // A YAML double-quoted scalar, so any user name reads back as itself.
  std::string yamlUser = "\"";
  for (char c : user) {
    if (c == '"' || c == '\\') yamlUser += '\\';
    yamlUser += c;
  }
  yamlUser += '"';
  // The token is shown once; the config keeps only its hash.
  out << "token: " << token << "\n"
      << "\n"
      << "Add to the mcp: section of the config (the token itself is not stored there):\n"
      << "  tokens:\n"
      << "    - user: " << yamlUser << "\n"
      << "      sha256: \"" << mcp::toHex(mcp::sha256(token)) << "\"\n"
      << "\n"
      << "An MCP client sends it as the header  Authorization: Bearer " << token << "\n";
  return 0;
}

int historyCommand(const CommandLine& cl, std::ostream& out, std::ostream& err) {
  std::shared_ptr<const config::Config> config;
  try {
    config = loadConfig(cl.config_path);
  } catch (const std::exception& e) {
    err << e.what() << "\n";
    return kExitUsage;
  }
  if (cl.history_action == "verify") return history::verifyHistoryCommand(config->history, cl.history, out, err);
  if (cl.history_action == "export") return history::exportHistoryCommand(config->history, cl.history, out, err);
  return history::rotateChainKeyCommand(config->history, out, err);
}

int runCommand(const std::string& path, const std::string& log_level) {
  std::shared_ptr<const config::Config> config;
  try {
    config = loadConfig(path);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  if (!log_level.empty()) {
    auto copy = std::make_shared<config::Config>(*config);
    copy->logging.level = log_level;
    config = std::move(copy);
  }
  auto logger = std::make_shared<spdlog::logger>("pgwarden",
                                                 makeStderrSink(config->logging.format == "json"));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config->logging.level));
  spdlog::flush_on(spdlog::level::info);
  for (const auto& w : config->warnings) spdlog::warn("{}", w);
  std::signal(SIGPIPE, SIG_IGN);

  SystemdNotifier notifier;
  Daemon daemon(config);
  daemon.setNotifier(&notifier);
  daemon.setLogLevelOverride(log_level);
  if (!daemon.start()) {
    spdlog::error("pgwarden could not start");
    return 1;
  }
  spdlog::info("pgwarden {} (git {}) started with {}", kVersion, kGitSha, path);
  if (auto st = notifier.ready("accepting connections"); !st) {
    spdlog::warn("systemd notify failed: {}", st.error());
  }
  return daemon.run();
}

}  // namespace pgwarden::daemon
