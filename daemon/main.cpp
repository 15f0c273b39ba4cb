// pgwarden's entry point: parses the command line (daemon/cli.cpp) and runs the command it names:
// the daemon, the config checker, the password and token tools, the history report, completion or
// the MCP stdio bridge.
#include <iostream>
#include <string>
#include <vector>

#include "daemon/cli.h"
#include "history/report.h"

int main(int argc, char** argv) {
  using namespace pgwarden::daemon;
  const CommandLine cl = parseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  switch (cl.command) {
    case Command::kHelp:
      std::cout << cl.help;
      return kExitOk;
    case Command::kVersion:
      std::cout << versionText();
      return kExitOk;
    case Command::kCheckConfig:
      return checkConfigCommand(cl.config_path, std::cout, std::cerr);
    case Command::kPasswd:
      return passwdCommand(cl.user, std::cout, std::cerr);
    case Command::kToken:
      return tokenCommand(cl.user, std::cout, std::cerr);
    case Command::kReport:
      return pgwarden::history::runReportCommand(cl.report, std::cout, std::cerr);
    case Command::kHistory:
      return historyCommand(cl, std::cout, std::cerr);
    case Command::kMcpStdio:
      return mcpStdioCommand(cl.mcp_url, cl.token_file, std::cin, std::cout, std::cerr);
    case Command::kCompletion:
      std::cout << completionScript(cl.shell);
      return kExitOk;
    case Command::kRun:
      return runCommand(cl.config_path, cl.log_level);
    case Command::kUsageError:
      std::cerr << "pgwarden: " << cl.error << "\nRun `pgwarden --help` for usage.\n";
      return kExitUsage;
  }
  return kExitUsage;
}
