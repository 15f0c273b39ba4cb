// pgwarden's entry point: dispatches the command line to the daemon, the config checker, the
// password tool or the history report.
#include <iostream>
#include <string>
#include <vector>

#include "daemon/cli.h"
#include "history/report.h"

int main(int argc, char** argv) {
  using namespace pgwarden::daemon;
  std::vector<std::string> args(argv + 1, argv + argc);
  const CommandLine cl = parseCommandLine(args);
  switch (cl.command) {
    case Command::kHelp:
      std::cout << usageText();
      return 0;
    case Command::kVersion:
      std::cout << versionText();
      return 0;
    case Command::kCheckConfig:
      return checkConfigCommand(cl.config_path, std::cout, std::cerr);
    case Command::kPasswd:
      return passwdCommand(cl.user, std::cout, std::cerr);
    case Command::kToken:
      return tokenCommand(cl.user, std::cout, std::cerr);
    case Command::kReport:
      return pgwarden::history::runReportCommand(argc - 1, argv + 1);
    case Command::kHistory:
      return historyCommand(args, std::cout, std::cerr);
    case Command::kRun:
      return runCommand(cl.config_path);
    case Command::kUsageError:
      std::cerr << "pgwarden: " << cl.error << "\n";
      return 2;
  }
  return 2;
}
