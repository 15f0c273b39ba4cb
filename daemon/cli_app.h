// The CLI11 definition of the command line, shared by the parser (cli.cpp) and the shell
// completion scripts made from it (cli_completion.cpp). Only those two files include CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "daemon/cli.h"

namespace pgwarden::daemon {

struct CliParser {
  CliParser();
  CliParser(const CliParser&) = delete;
  CliParser& operator=(const CliParser&) = delete;

  // Parses args (without argv[0]) into `result`.
  void parse(const std::vector<std::string>& args);

  CLI::App app;
  CommandLine result;
  // The values an option or positional accepts, for completion (the parser checks them too).
  std::map<const CLI::Option*, std::vector<std::string>> choices;

 private:
  CLI::Option* choose(CLI::Option* option, std::vector<std::string> values);
  void defineReport();
  void addMcpStdio();
  void finish();

  std::string check_path_;
  std::string report_kind_;
  std::string since_;
  std::string report_format_;
  bool report_json_ = false;
  bool version_ = false;
  CLI::Option* config_ = nullptr;
  CLI::Option* check_ = nullptr;
  CLI::App* passwd_ = nullptr;
  CLI::App* token_ = nullptr;
  CLI::App* report_ = nullptr;
  CLI::App* completion_ = nullptr;
  CLI::App* history_ = nullptr;
  CLI::App* mcp_stdio_ = nullptr;
  std::string history_since_;
};

}  // namespace pgwarden::daemon
