// The command line: one CLI11 definition for the daemon and every subcommand, its help, its usage
// errors, the completion scripts made from it and pgwarden(8)'s synopsis.
#include "daemon/cli.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "mcp/token_auth.h"

using namespace pgwarden::daemon;
using pgwarden::history::ReportKind;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST(CommandLine, Commands) {
  EXPECT_EQ(parseCommandLine({"--help"}).command, Command::kHelp);
  EXPECT_EQ(parseCommandLine({"--version"}).command, Command::kVersion);
  auto run = parseCommandLine({"--config", "/etc/pgwarden/pgwarden.yaml"});
  EXPECT_EQ(run.command, Command::kRun);
  EXPECT_EQ(run.config_path, "/etc/pgwarden/pgwarden.yaml");
  EXPECT_EQ(parseCommandLine({"--config=x.yaml"}).config_path, "x.yaml");
  EXPECT_EQ(parseCommandLine({"-c", "x.yaml"}).config_path, "x.yaml");
  auto check = parseCommandLine({"--check-config", "x.yaml"});
  EXPECT_EQ(check.command, Command::kCheckConfig);
  EXPECT_EQ(check.config_path, "x.yaml");
  auto pw = parseCommandLine({"passwd", "agent"});
  EXPECT_EQ(pw.command, Command::kPasswd);
  EXPECT_EQ(pw.user, "agent");
  auto tok = parseCommandLine({"token", "agent"});
  EXPECT_EQ(tok.command, Command::kToken);
  EXPECT_EQ(tok.user, "agent");
  auto comp = parseCommandLine({"completion", "zsh"});
  EXPECT_EQ(comp.command, Command::kCompletion);
  EXPECT_EQ(comp.shell, "zsh");
}

// Each of these used to fail or do the wrong thing: a second option after --config was refused,
// and `token --help` minted a token for a user named "--help".
TEST(CommandLine, FlagsCombine) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--config", "x.yaml", "--log-level", "debug"},
                                             {"--log-level", "debug", "--config", "x.yaml"},
                                             {"-c", "x.yaml", "--log-level=debug"},
                                             {"--config=x.yaml", "--log-level", "debug"}}) {
    const auto cl = parseCommandLine(args);
    ASSERT_EQ(cl.command, Command::kRun) << cl.error;
    EXPECT_EQ(cl.config_path, "x.yaml");
    EXPECT_EQ(cl.log_level, "debug");
  }
}

TEST(CommandLine, HelpOfEverySubcommandIsHelpNotAnArgument) {
  for (const char* sub : {"passwd", "token", "report", "completion"}) {
    for (const char* flag : {"--help", "-h"}) {
      const auto cl = parseCommandLine({sub, flag});
      ASSERT_EQ(cl.command, Command::kHelp) << sub << " " << flag << ": " << cl.error;
      EXPECT_NE(cl.help.find(std::string("pgwarden ") + sub), std::string::npos) << cl.help;
      EXPECT_TRUE(cl.user.empty());
    }
  }
  EXPECT_NE(parseCommandLine({"token", "--help"}).help.find("USER"), std::string::npos);
  const std::string report = parseCommandLine({"report", "--help"}).help;
  for (const char* w :
       {"KIND", "--store", "--config", "--json", "--min-variants", "--since", "--limit"}) {
    EXPECT_NE(report.find(w), std::string::npos) << w << "\n" << report;
  }
}

TEST(CommandLine, Report) {
  const auto cl = parseCommandLine({"report", "retries", "--store", "sqlite:/tmp/h.db", "--json",
                                    "--min-variants=4", "--since", "24h", "--limit", "7"});
  ASSERT_EQ(cl.command, Command::kReport) << cl.error;
  EXPECT_EQ(cl.report.options.kind, ReportKind::kRetries);
  EXPECT_EQ(cl.report.store, "sqlite:/tmp/h.db");
  EXPECT_EQ(cl.report.format, pgwarden::history::ReportFormat::kJson);
  EXPECT_EQ(cl.report.options.min_variants, 4);
  EXPECT_EQ(cl.report.options.since, std::chrono::hours(24));
  EXPECT_EQ(cl.report.options.limit, 7);
  const auto z = parseCommandLine({"report", "--config", "p.yaml", "zeros"});
  ASSERT_EQ(z.command, Command::kReport) << z.error;
  EXPECT_EQ(z.report.options.kind, ReportKind::kZeros);
  EXPECT_EQ(z.report.config_file, "p.yaml");
  EXPECT_EQ(z.report.format, pgwarden::history::ReportFormat::kTable);
  const auto c = parseCommandLine({"report", "conversation", "conv-7", "--format", "html"});
  ASSERT_EQ(c.command, Command::kReport) << c.error;
  EXPECT_EQ(c.report.options.kind, ReportKind::kConversation);
  EXPECT_EQ(c.report.options.conversation, "conv-7");
  EXPECT_EQ(c.report.format, pgwarden::history::ReportFormat::kHtml);
  EXPECT_EQ(parseCommandLine({"report", "conversation"}).command, Command::kUsageError);
  EXPECT_EQ(parseCommandLine({"report", "zeros", "conv-7"}).command, Command::kUsageError);
  EXPECT_EQ(parseCommandLine({"report", "zeros", "--format", "xml"}).command, Command::kUsageError);
}

TEST(CommandLine, UsageErrorsSayWhy) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"--no-such-flag"},
           {"--config"},
           {"--config", "a", "b"},
           {"--config", ""},
           {"passwd"},
           {"token"},
           {"token", "a", "b"},
           {"token", "--frobnicate"},
           {"--log-level", "debug"},
           {"--config", "x", "--log-level", "loud"},
           {"--config", "x", "token", "agent"},
           {"--check-config", "a", "--config", "b"},
           {"completion", "fish"},
           {"report"},
           {"report", "bogus"},
           {"report", "retries", "--store", "mysql:x"},
           {"report", "retries", "--store", "sqlite:a", "--config", "b"},
           {"report", "retries", "--limit", "0"},
           {"report", "retries", "--min-variants", "x"},
           {"report", "retries", "--since", "soon"},
           {"report", "retries", "--frobnicate"}}) {
    const auto cl = parseCommandLine(args);
    std::string shown;
    for (const auto& a : args) shown += "'" + a + "' ";
    EXPECT_EQ(cl.command, Command::kUsageError) << shown;
    EXPECT_FALSE(cl.error.empty()) << shown;
  }
  EXPECT_NE(parseCommandLine({"report", "bogus"}).error.find("bogus"), std::string::npos);
}

TEST(CommandLine, HelpNamesEveryCommand) {
  const auto text = usageText();
  for (const char* w :
       {"--config", "--check-config", "--log-level", "passwd", "token", "--version", "report"}) {
    EXPECT_NE(text.find(w), std::string::npos) << w;
  }
  EXPECT_NE(text.find("Exit status: 0"), std::string::npos) << text;
  EXPECT_EQ(text.find("completion"), std::string::npos) << "completion is hidden";
  EXPECT_EQ(versionText().rfind("pgwarden ", 0), 0u);
}

TEST(CommandLine, CompletionScriptsOfferEveryWord) {
  const std::string bash = completionScript("bash");
  const std::string zsh = completionScript("zsh");
  EXPECT_NE(bash.find("complete -o default -F _pgwarden pgwarden"), std::string::npos);
  EXPECT_EQ(zsh.rfind("#compdef pgwarden\n", 0), 0u);
  for (const auto& w : commandLineWords()) {
    EXPECT_NE(bash.find(w), std::string::npos) << "bash: " << w;
    EXPECT_NE(zsh.find(w), std::string::npos) << "zsh: " << w;
  }
  for (const char* choice : {"retries", "zeros", "debug"}) {
    EXPECT_NE(bash.find(choice), std::string::npos) << choice;
    EXPECT_NE(zsh.find(choice), std::string::npos) << choice;
  }
  EXPECT_TRUE(completionScript("fish").empty());
}

// pgwarden(8) names every command and option the parser knows, and the exit codes it uses.
TEST(CommandLine, ManPageMatchesTheParser) {
  std::string page = readFile(std::string(PGWARDEN_SOURCE_DIR) + "/packaging/man/pgwarden.8");
  ASSERT_FALSE(page.empty());
  // man(7) writes '-' as '\-'.
  for (size_t at = 0; (at = page.find("\\-", at)) != std::string::npos;) page.erase(at, 1);
  const auto synopsis_at = page.find(".SH SYNOPSIS");
  const auto description_at = page.find(".SH DESCRIPTION");
  ASSERT_LT(synopsis_at, description_at);
  const std::string synopsis = page.substr(synopsis_at, description_at - synopsis_at);
  for (const auto& w : commandLineWords()) {
    if (w == "completion") {
      EXPECT_NE(page.find(w), std::string::npos) << w;  // hidden from --help, not from the page
    } else if (w.size() > 2 || w[0] != '-') {
      EXPECT_NE(synopsis.find(w), std::string::npos) << "SYNOPSIS lacks " << w;
    }
  }
  const auto exit_at = page.find(".SH EXIT STATUS");
  ASSERT_NE(exit_at, std::string::npos);
  const std::string exit_status = page.substr(exit_at, page.find(".SH", exit_at + 3) - exit_at);
  for (const char* code : {".B 0", ".B 1", ".B 2"}) {
    EXPECT_NE(exit_status.find(code), std::string::npos) << code << "\n" << exit_status;
  }
}

TEST(CommandLine, TokenPrintsATokenAndItsHashOnly) {
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(tokenCommand("agent", out, err), 0);
  const std::string text = out.str();
  const auto at = text.find("token: pgw_");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string token = text.substr(at + 7, text.find('\n', at) - at - 7);
  EXPECT_NE(text.find("sha256: \"" + pgwarden::mcp::toHex(pgwarden::mcp::sha256(token)) + "\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("- user: \"agent\""), std::string::npos) << text;
}
