// The command line.
#include "daemon/cli.h"

#include <gtest/gtest.h>

#include <sstream>

#include "mcp/token_auth.h"

using namespace pgwarden::daemon;

TEST(CommandLine, Commands) {
  EXPECT_EQ(parseCommandLine({"--help"}).command, Command::kHelp);
  EXPECT_EQ(parseCommandLine({"--version"}).command, Command::kVersion);
  auto run = parseCommandLine({"--config", "/etc/pgwarden/pgwarden.yaml"});
  EXPECT_EQ(run.command, Command::kRun);
  EXPECT_EQ(run.config_path, "/etc/pgwarden/pgwarden.yaml");
  EXPECT_EQ(parseCommandLine({"--config=x.yaml"}).config_path, "x.yaml");
  auto check = parseCommandLine({"--check-config", "x.yaml"});
  EXPECT_EQ(check.command, Command::kCheckConfig);
  EXPECT_EQ(check.config_path, "x.yaml");
  auto pw = parseCommandLine({"passwd", "agent"});
  EXPECT_EQ(pw.command, Command::kPasswd);
  EXPECT_EQ(pw.user, "agent");
  EXPECT_EQ(parseCommandLine({"report", "retries", "--json"}).command, Command::kReport);
  auto tok = parseCommandLine({"token", "agent"});
  EXPECT_EQ(tok.command, Command::kToken);
  EXPECT_EQ(tok.user, "agent");
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

TEST(CommandLine, UsageErrorsSayWhy) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"--no-such-flag"}, {"--config"}, {"--config", "a", "b"}, {"passwd"}, {"token"}}) {
    auto cl = parseCommandLine(args);
    EXPECT_EQ(cl.command, Command::kUsageError);
    EXPECT_FALSE(cl.error.empty());
  }
}

TEST(CommandLine, HelpNamesEveryCommand) {
  const auto text = usageText();
  for (const char* w : {"--config", "--check-config", "passwd", "token", "--version", "report"}) {
    EXPECT_NE(text.find(w), std::string::npos) << w;
  }
  EXPECT_EQ(versionText().rfind("pgwarden ", 0), 0u);
}
