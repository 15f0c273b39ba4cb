// The command line, defined once with CLI11 (cli.cpp): the daemon (`--config FILE`),
// `--check-config FILE`, `passwd USER`, `token USER`, `report KIND`, `completion bash|zsh`,
// `mcp-stdio --url URL --token-file FILE`,
// `--version`, `--help` on each. Parsing is pure so it can be tested; the commands are in
// cli_commands.cpp.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "history/report.h"
#include "history/verify.h"

namespace pgwarden::daemon {

enum class Command {
  kRun,
  kCheckConfig,
  kPasswd,
  kToken,
  kReport,
  kCompletion,
  kHistory,
  kMcpStdio,
  kVersion,
  kHelp,
  kUsageError
};

// Exit codes, the same for every command (pgwarden(8), EXIT STATUS).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and failed: a bad config, a store error
inline constexpr int kExitUsage = 2;    // the command line itself is wrong

struct CommandLine {
  Command command = Command::kUsageError;
  std::string config_path;        // kRun, kCheckConfig
  std::string log_level;          // kRun: overrides logging.level (empty: the config's)
  std::string user;               // kPasswd, kToken
  std::string shell;              // kCompletion: "bash" or "zsh"
  history::ReportRequest report;  // kReport
  std::string history_action;     // kHistory: verify, export or rotate-key
  history::HistoryCommandOptions history;  // kHistory (config_path: the config to read)
  std::string mcp_url;                     // kMcpStdio: the endpoint to forward to
  std::string token_file;                  // kMcpStdio: the file holding the bearer token
  std::string help;               // kHelp: the help of the command asked about
  std::string error;              // kUsageError
};

CommandLine parseCommandLine(const std::vector<std::string>& args);  // args without argv[0]

std::string usageText();  // `pgwarden --help`
std::string versionText();
// The shell completion script for `shell` ("bash" or "zsh"), made from the same definition the
// parser uses; empty for another shell.
std::string completionScript(const std::string& shell);

// The command names and option spellings the parser knows (for the man page test): "passwd",
// "--config", ... including the hidden ones.
std::vector<std::string> commandLineWords();

// `--check-config FILE`: 0 when valid, 1 otherwise (errors as "FILE:LINE: key: message").
int checkConfigCommand(const std::string& path, std::ostream& out, std::ostream& err);
// `passwd USER`: reads the password (without echo on a terminal, else the first line of stdin)
// and prints a SCRAM-SHA-256 verifier.
int passwdCommand(const std::string& user, std::ostream& out, std::ostream& err);
// `token USER`: prints a new MCP bearer token and the mcp.tokens entry (its SHA-256) for USER.
int tokenCommand(const std::string& user, std::ostream& out, std::ostream& err);
// `history verify|export|rotate-key --config FILE ...`: the chain over the query history
// (history/verify.h): 0 when it holds, 1 naming the first bad record, 2 on a config error.
int historyCommand(const CommandLine& cl, std::ostream& out, std::ostream& err);
// `mcp-stdio --url URL --token-file FILE`: an MCP stdio server (stdin/stdout) forwarding every
// message to the endpoint at URL with the token in FILE (daemon/mcp_stdio.cpp); 0 at end of input.
int mcpStdioCommand(const std::string& url, const std::string& token_file, std::istream& in,
                    std::ostream& out, std::ostream& err);
// `--config FILE`: runs the daemon in the foreground until SIGTERM/SIGINT. `log_level`, when not
// empty, replaces logging.level at start and on every reload.
int runCommand(const std::string& path, const std::string& log_level);

}  // namespace pgwarden::daemon
