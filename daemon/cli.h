// The command line: `--config FILE` (run), `--check-config FILE`, `passwd USER`, `token USER`, `report ...`,
// `--version`, `--help`. Parsing is pure so it can be tested; running is in cli.cpp.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace pgwarden::daemon {

enum class Command {
  kRun,
  kCheckConfig,
  kPasswd,
  kToken,
  kReport,
  kHistory,
  kVersion,
  kHelp,
  kUsageError
};

struct CommandLine {
  Command command = Command::kUsageError;
  std::string config_path;  // kRun, kCheckConfig
  std::string user;         // kPasswd, kToken
  std::string error;        // kUsageError
};

CommandLine parseCommandLine(const std::vector<std::string>& args);  // args without argv[0]

std::string usageText();
std::string versionText();

// `--check-config FILE`: 0 when valid, 1 otherwise (errors as "FILE:LINE: key: message").
int checkConfigCommand(const std::string& path, std::ostream& out, std::ostream& err);
// `passwd USER`: reads the password (without echo on a terminal, else the first line of stdin)
// and prints a SCRAM-SHA-256 verifier.
int passwdCommand(const std::string& user, std::ostream& out, std::ostream& err);
// `token USER`: prints a new MCP bearer token and the mcp.tokens entry (its SHA-256) for USER.
int tokenCommand(const std::string& user, std::ostream& out, std::ostream& err);
// `history verify|export|rotate-key --config FILE [--since TIME] [--input FILE] [--output FILE]`:
// the chain over the query history (history/verify.h). `args` without argv[0]. Exit 0 when the
// chain holds, 1 naming the first bad record, 2 on a usage or config error.
int historyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `--config FILE`: runs the daemon in the foreground until SIGTERM/SIGINT.
int runCommand(const std::string& path);

}  // namespace pgwarden::daemon
