// The command line, defined once with CLI11: the daemon's options, each subcommand with its own
// options and `--help`, the same rules everywhere (an option belongs to the command it is given
// after; a usage error exits 2). pgwarden(8)'s synopsis is checked against this definition.
#include "daemon/cli.h"

#include <algorithm>

#include "common/config_util.h"
#include "daemon/cli_app.h"
#include "history/verify.h"
#include "pgwarden_version.h"

namespace pgwarden::daemon {

namespace {

constexpr const char* kExitStatus =
    "Exit status: 0 success; 1 the command failed (a config that does not load, a store that\n"
    "cannot be read, a daemon that could not start); 2 the command line is wrong.";
constexpr const char* kFooter =
    "Run `pgwarden COMMAND --help` for a command's options.\n"
    "\n"
    "Exit status: 0 success; 1 the command failed (a config that does not load, a store that\n"
    "cannot be read, a daemon that could not start); 2 the command line is wrong.\n"
    "\n"
    "Signals: SIGTERM stops accepting and lets running statements finish (up to\n"
    "limits.shutdown_timeout); SIGINT does the same with a shorter wait; SIGHUP reloads.";

// "sqlite:PATH" or "postgres:DSN", checked here so a bad form is a usage error like any other.
std::string checkStore(std::string& text) {
  std::string store;
  std::string target;
  if (history::parseReportStore(text, &store, &target)) return "";
  return "--store needs sqlite:PATH or postgres:DSN";
}

std::string checkDuration(std::string& text) {
  const auto d = config::parseDuration(text);
  if (d && d->count() > 0) return "";
  return "needs a duration like 30m, 24h or 7d";
}

}  // namespace

CliParser::CliParser()
    : app("pgwarden: a PostgreSQL proxy that checks every statement an agent sends.", "pgwarden") {
  app.require_subcommand(0, 1);
  app.set_help_flag("-h,--help", "print this help and exit");
  config_ = app.add_option("-c,--config", result.config_path,
                           "run the daemon in the foreground with FILE (logs to stderr)")
                ->type_name("FILE");
  check_ = app.add_option("--check-config", check_path_,
                          "validate FILE and the files it names; exit 0 when valid, 1 otherwise")
               ->type_name("FILE")
               ->excludes(config_);
  auto* level = choose(app.add_option("--log-level", result.log_level,
                                      "with --config: log at LEVEL instead of logging.level "
                                      "(also after a reload)")
                           ->type_name("LEVEL")
                           ->needs(config_),
                       {"trace", "debug", "info", "warn", "error"});
  auto* version = app.add_flag("-V,--version", version_, "print the version and exit")
                      ->excludes(config_)
                      ->excludes(check_);

  passwd_ = app.add_subcommand(
      "passwd",
      "read a password from stdin (without echo on a terminal) and print a SCRAM-SHA-256 "
      "verifier for USER's `password` in the config");
  passwd_->add_option("USER", result.user, "the user the verifier is for")->required();

  token_ = app.add_subcommand(
      "token", "print a new MCP bearer token for USER and its mcp.tokens entry (its SHA-256)");
  token_->add_option("USER", result.user, "the user the token logs in as")->required();

  defineReport();

  // Hidden (no group): for packaging and for users who install it by hand.
  completion_ = app.add_subcommand("completion", "print the shell completion script for SHELL");
  completion_->group("");
  choose(completion_->add_option("SHELL", result.shell, "bash or zsh")->required(),
         {"bash", "zsh"});

  history_ = app.add_subcommand(
      "history", "check or export the query history's chain (docs/history-chain.md)");
  history_->require_subcommand(1);
  struct Action {
    const char* name;
    const char* help;
  };
  for (const Action a : {Action{"verify", "walk the chain; exit 1 naming the first record that was "
                                           "edited, deleted, inserted or reordered"},
                         Action{"export", "write the history as JSON lines with its chain"},
                         Action{"rotate-key", "add a new chain key (used from the next start)"}}) {
    CLI::App* sub = history_->add_subcommand(a.name, a.help);
    sub->add_option("-c,--config", result.config_path, "the config whose history section to read")
        ->type_name("FILE")
        ->required();
    if (std::string_view(a.name) != "rotate-key") {
      sub->add_option("--since", history_since_,
                      "only records from TIME on: a duration back from now (24h) or a time "
                      "(2026-12-06T10:00:00Z)")
          ->type_name("TIME")
          ->check(CLI::Validator(
              [](std::string& v) {
                return history::parseSince(v, history::wallClockMicros())
                           ? std::string()
                           : std::string("needs a duration (24h) or a time (2026-12-06T10:00:00Z)");
              },
              "", "time"));
    }
    if (std::string_view(a.name) == "verify") {
      sub->add_option("--input", result.history.input, "verify this JSON-lines export instead")
          ->type_name("FILE");
    }
    if (std::string_view(a.name) == "export") {
      sub->add_option("--output", result.history.output, "write to FILE (default: stdout)")
          ->type_name("FILE");
    }
    sub->footer(kExitStatus);
  }

  addMcpStdio();

  // Options belong to the command they are given after: the daemon's options never reach a
  // subcommand, so `pgwarden --config x token agent` is an error, not a token.
  for (CLI::App* sub : {passwd_, token_, report_, completion_, history_, mcp_stdio_}) {
    sub->excludes(config_)->excludes(check_)->excludes(level)->excludes(version);
    sub->footer(kExitStatus);
  }
  app.footer(kFooter);
}

// `report KIND [ID]` and its options.
void CliParser::defineReport() {
  report_ = app.add_subcommand(
      "report",
      "read the query history: what agents retry, rediscover, are denied, get nothing "
      "from (docs/history.md)");
  choose(report_
             ->add_option("KIND", report_kind_,
                          "retries: one fingerprint tried with many texts in a conversation; "
                          "repeats: fingerprints seen in several conversations; denials: deny "
                          "codes by table and group; zeros: results with no rows or a single 0; "
                          "conversation ID: one conversation's statements in order")
             ->required(),
         {"retries", "repeats", "denials", "zeros", "conversation"});
  report_->add_option("ID", result.report.options.conversation,
                      "conversation: its conversation_id, or session:INSTANCE:SESSION as the "
                      "other reports show it");
  auto* store = report_
                    ->add_option("--store", result.report.store,
                                 "read this store instead of the config's history section")
                    ->type_name("sqlite:PATH|postgres:DSN")
                    ->check(CLI::Validator(checkStore, "", "store"));
  report_
      ->add_option("-c,--config", result.report.config_file,
                   "read the store from FILE's history section (default "
                   "/etc/pgwarden/pgwarden.yaml)")
      ->type_name("FILE")
      ->excludes(store);
  report_->add_flag("--json", report_json_, "print JSON instead of a table (--format json)");
  choose(report_->add_option("--format", report_format_, "table (default), csv, json or html")
             ->type_name("FORMAT"),
         {"table", "csv", "json", "html"});
  report_
      ->add_option("--min-variants", result.report.options.min_variants,
                   "retries: different texts needed (default 3)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, int64_t{999999999}));
  report_->add_option("--since", since_, "only statements started within DURATION (30m, 24h, 7d)")
      ->type_name("DURATION")
      ->check(CLI::Validator(checkDuration, "", "duration"));
  report_->add_option("--limit", result.report.options.limit, "at most N rows (default 50)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, int64_t{999999999}));
}

void CliParser::addMcpStdio() {
  mcp_stdio_ = app.add_subcommand(
      "mcp-stdio",
      "serve MCP on stdin/stdout, forwarding each message to pgwarden's MCP endpoint (for "
      "clients that start local commands, such as Claude Desktop)");
  mcp_stdio_->add_option("--url", result.mcp_url, "the endpoint, e.g. http://127.0.0.1:6433/mcp")
      ->type_name("URL")
      ->required();
  mcp_stdio_
      ->add_option("--token-file", result.token_file,
                   "the file whose first line is the bearer token")
      ->type_name("FILE")
      ->required();
}

CLI::Option* CliParser::choose(CLI::Option* option, std::vector<std::string> values) {
  option->check(CLI::IsMember(values));
  choices[option] = std::move(values);
  return option;
}

void CliParser::parse(const std::vector<std::string>& args) {
  // CLI11 takes its vector last argument first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    result.command = Command::kHelp;
    result.help = app.help();  // the help of the subcommand it was asked of, if any
    return;
  } catch (const CLI::CallForAllHelp&) {
    result.command = Command::kHelp;
    result.help = app.help("", CLI::AppFormatMode::All);
    return;
  } catch (const CLI::ParseError& e) {
    result.command = Command::kUsageError;
    result.error = e.what();
    return;
  }
  finish();
}

void CliParser::finish() {
  if (version_) {
    result.command = Command::kVersion;
  } else if (passwd_->parsed()) {
    result.command = Command::kPasswd;
  } else if (token_->parsed()) {
    result.command = Command::kToken;
  } else if (completion_->parsed()) {
    result.command = Command::kCompletion;
  } else if (mcp_stdio_->parsed()) {
    result.command = Command::kMcpStdio;
    return;
  } else if (history_->parsed()) {
    result.command = Command::kHistory;
    for (const CLI::App* sub : history_->get_subcommands()) result.history_action = sub->get_name();
    if (!history_since_.empty()) {
      result.history.since_us = history::parseSince(history_since_, history::wallClockMicros()).value_or(0);
    }
    return;
  } else if (report_->parsed()) {
    result.command = Command::kReport;
    history::parseReportKind(report_kind_, &result.report.options.kind);
    if (!since_.empty()) result.report.options.since = *config::parseDuration(since_);
    if (!report_format_.empty()) history::parseReportFormat(report_format_, &result.report.format);
    if (report_json_) result.report.format = history::ReportFormat::kJson;
    const bool conversation = result.report.options.kind == history::ReportKind::kConversation;
    if (conversation == result.report.options.conversation.empty()) {
      result.command = Command::kUsageError;
      result.error = conversation ? "report conversation needs the conversation's ID"
                                  : "only report conversation takes an ID";
      return;
    }
  } else if (check_->count() > 0) {
    result.command = Command::kCheckConfig;
    result.config_path = check_path_;
  } else if (config_->count() > 0) {
    result.command = Command::kRun;
  } else {
    result.command = Command::kUsageError;
    result.error = "nothing to do: give --config FILE";
    return;
  }
  if ((result.command == Command::kRun || result.command == Command::kCheckConfig) &&
      result.config_path.empty()) {
    result.command = Command::kUsageError;
    result.error = "the config file name is empty";
  }
}

CommandLine parseCommandLine(const std::vector<std::string>& args) {
  CliParser parser;
  parser.parse(args);
  return parser.result;
}

std::string usageText() {
  CliParser parser;
  return parser.app.help();
}

std::string versionText() {
  return std::string("pgwarden ") + kVersion + " (git " + kGitSha + ")\n";
}

std::vector<std::string> commandLineWords() {
  CliParser parser;
  std::vector<std::string> words;
  const auto addOptions = [&words](const CLI::App& app) {
    for (const CLI::Option* o : app.get_options()) {
      if (o->get_positional()) continue;
      for (const auto& n : o->get_lnames()) words.push_back("--" + n);
      for (const auto& n : o->get_snames()) words.push_back("-" + n);
    }
  };
  addOptions(parser.app);
  for (const CLI::App* sub : parser.app.get_subcommands([](const CLI::App*) { return true; })) {
    words.push_back(sub->get_name());
    addOptions(*sub);
    for (const CLI::App* inner : sub->get_subcommands([](const CLI::App*) { return true; })) {
      words.push_back(inner->get_name());
      addOptions(*inner);
    }
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

}  // namespace pgwarden::daemon
