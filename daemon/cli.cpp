// Command implementations. Logging goes to stderr (journald-aware) so pgwarden runs under
// systemd as a plain foreground process.
#include "daemon/cli.h"

#include <spdlog/spdlog.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <iostream>

#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/salt_key.h"
#include "daemon/systemd_notify.h"
#include "history/verify.h"
#include "mcp/token_auth.h"
#include "pgwarden_version.h"
#include "protocol/auth.h"

namespace pgwarden::daemon {

CommandLine parseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  if (args.empty()) {
    cl.error = "nothing to do: give --config FILE (see --help)";
    return cl;
  }
  const std::string& a = args[0];
  const auto needsValue = [&](Command c, std::string& field) {
    if (args.size() != 2 || args[1].empty()) {
      cl.error = a + " takes exactly one argument";
      return;
    }
    cl.command = c;
    field = args[1];
  };
  if (a == "--help" || a == "-h") {
    cl.command = Command::kHelp;
  } else if (a == "--version" || a == "-V") {
    cl.command = Command::kVersion;
  } else if (a == "--config" || a == "-c") {
    needsValue(Command::kRun, cl.config_path);
  } else if (a.rfind("--config=", 0) == 0 && a.size() > 9 && args.size() == 1) {
    cl.command = Command::kRun;
    cl.config_path = a.substr(9);
  } else if (a == "--check-config") {
    needsValue(Command::kCheckConfig, cl.config_path);
  } else if (a.rfind("--check-config=", 0) == 0 && a.size() > 15 && args.size() == 1) {
    cl.command = Command::kCheckConfig;
    cl.config_path = a.substr(15);
  } else if (a == "passwd") {
    needsValue(Command::kPasswd, cl.user);
  } else if (a == "token") {
    needsValue(Command::kToken, cl.user);
  } else if (a == "report") {
    cl.command = Command::kReport;
  } else if (a == "history") {
    cl.command = Command::kHistory;
  } else {
    cl.error = "unknown argument \"" + a + "\" (see --help)";
  }
  return cl;
}

std::string usageText() {
  return "pgwarden: a PostgreSQL proxy that checks every statement an agent sends.\n"
         "\n"
         "Usage:\n"
         "  pgwarden --config FILE        run in the foreground (logs to stderr)\n"
         "  pgwarden --check-config FILE  validate FILE; exit 0 when valid, 1 otherwise\n"
         "  pgwarden passwd USER          read a password from stdin, print a SCRAM-SHA-256\n"
         "                                verifier for USER's `password` in the config\n"
         "  pgwarden token USER           print a new MCP bearer token for USER and the\n"
         "                                mcp.tokens entry (its SHA-256) for the config\n"
         "  pgwarden report KIND ...      read the query history (see `pgwarden report --help`)\n"
         "  pgwarden history verify --config FILE [--since TIME] [--input FILE]\n"
         "                                walk the history's chain; exit 1 naming the first\n"
         "                                record edited, deleted, inserted or moved\n"
         "  pgwarden history export --config FILE [--since TIME] [--output FILE]\n"
         "                                write the history as JSON lines with its chain\n"
         "  pgwarden history rotate-key --config FILE\n"
         "                                add a new chain key (used from the next start)\n"
         "  pgwarden --version            print the version\n"
         "  pgwarden --help               print this help\n"
         "\n"
         "Signals: SIGTERM stops accepting and lets running statements finish (up to\n"
         "limits.shutdown_timeout); SIGINT does the same with a shorter wait; SIGHUP reloads.\n";
}

std::string versionText() {
  return std::string("pgwarden ") + kVersion + " (git " + kGitSha + ")\n";
}

int checkConfigCommand(const std::string& path, std::ostream& out, std::ostream& err) {
  try {
    auto cfg = loadConfig(path);
    for (const auto& w : cfg->warnings) err << "warning: " << w << "\n";
    if (const std::string w = checkSaltKey(cfg->auth); !w.empty()) err << "warning: " << w << "\n";
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

int historyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const auto usage = [&](const std::string& why) {
    err << "pgwarden history: " << why << "\n"
        << "usage: pgwarden history verify|export|rotate-key --config FILE [--since TIME]\n"
        << "       [--input FILE (verify)] [--output FILE (export)]\n";
    return 2;
  };
  if (args.size() < 2) return usage("give verify, export or rotate-key");
  const std::string& sub = args[1];
  if (sub != "verify" && sub != "export" && sub != "rotate-key") {
    return usage("unknown subcommand \"" + sub + "\"");
  }
  std::string config_path;
  history::HistoryCommandOptions o;
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) return usage(a + " needs a value");
    const std::string& v = args[++i];
    if (a == "--config") {
      config_path = v;
    } else if (a == "--since" && sub != "rotate-key") {
      const auto since = history::parseSince(v, history::wallClockMicros());
      if (!since) return usage("--since takes a duration (24h) or a time (2026-12-06T10:00:00Z)");
      o.since_us = *since;
    } else if (a == "--input" && sub == "verify") {
      o.input = v;
    } else if (a == "--output" && sub == "export") {
      o.output = v;
    } else {
      return usage("unknown option " + a);
    }
  }
  if (config_path.empty()) return usage("--config FILE is required");
  std::shared_ptr<const Config> config;
  try {
    config = loadConfig(config_path);
  } catch (const std::exception& e) {
    err << e.what() << "\n";
    return 2;
  }
  if (sub == "verify") return history::verifyHistoryCommand(config->history, o, out, err);
  if (sub == "export") return history::exportHistoryCommand(config->history, o, out, err);
  return history::rotateChainKeyCommand(config->history, out, err);
}

int runCommand(const std::string& path) {
  std::shared_ptr<const Config> config;
  try {
    config = loadConfig(path);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  auto logger = std::make_shared<spdlog::logger>("pgwarden", makeStderrSink());
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config->logging.level));
  spdlog::flush_on(spdlog::level::info);
  for (const auto& w : config->warnings) spdlog::warn("{}", w);
  std::signal(SIGPIPE, SIG_IGN);

  SystemdNotifier notifier;
  Daemon daemon(config);
  daemon.setNotifier(&notifier);
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
