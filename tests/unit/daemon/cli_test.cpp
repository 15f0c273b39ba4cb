// The command line.
#include "daemon/cli.h"

#include <gtest/gtest.h>

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
}

TEST(CommandLine, UsageErrorsSayWhy) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"--no-such-flag"}, {"--config"}, {"--config", "a", "b"}, {"passwd"}}) {
    auto cl = parseCommandLine(args);
    EXPECT_EQ(cl.command, Command::kUsageError);
    EXPECT_FALSE(cl.error.empty());
  }
}

TEST(CommandLine, HelpNamesEveryCommand) {
  const auto text = usageText();
  for (const char* w : {"--config", "--check-config", "passwd", "--version", "report"}) {
    EXPECT_NE(text.find(w), std::string::npos) << w;
  }
  EXPECT_EQ(versionText().rfind("pgwarden ", 0), 0u);
}
