// pool: the carried settings' statements: a client without application_name gets '' and a RESET
// (or SET ... TO DEFAULT) of a carried setting goes back to the value the client started with,
// as on a direct connection, never to pgwarden's login values.
#include "pool/carried_settings.h"

#include <gtest/gtest.h>

#include "analysis/analysis.h"

namespace pgwarden::daemon {
namespace {

std::optional<std::string> rewrite(const std::string& sql, const ParamList& startup) {
  const auto a = analysis::analyzeUncached(sql);
  EXPECT_TRUE(a->ok) << a->error;
  return pool::resetsToStartup(sql, a->statements, startup);
}

const ParamList kStartup = {
    {"DateStyle", "Postgres, MDY"}, {"TimeZone", "Asia/Tokyo"}, {"extra_float_digits", "2"}};

TEST(CarriedSettings, StartupValues) {
  EXPECT_EQ(pool::startupValue("DateStyle", kStartup), "Postgres, MDY");
  EXPECT_EQ(pool::startupValue("application_name", kStartup), "");  // not sent: '' as on the server
  EXPECT_EQ(pool::startupValue("IntervalStyle", kStartup),
            std::nullopt);  // the login value is right
  EXPECT_EQ(pool::startupValue("search_path", {{"search_path", "x"}}), std::nullopt);
  EXPECT_EQ(pool::startupValue("client_encoding", {{"client_encoding", "LATIN1"}}), std::nullopt);
}

TEST(CarriedSettings, ResetGoesBackToTheStartupValue) {
  EXPECT_EQ(rewrite("RESET datestyle", kStartup), "SET DateStyle TO 'Postgres, MDY'");
  EXPECT_EQ(rewrite("SET DateStyle TO DEFAULT", kStartup), "SET DateStyle TO 'Postgres, MDY'");
  EXPECT_EQ(rewrite("SET LOCAL timezone = default", kStartup),
            "SET LOCAL TimeZone TO 'Asia/Tokyo'");
  EXPECT_EQ(rewrite("reset extra_float_digits", kStartup), "SET extra_float_digits TO '2'");
  EXPECT_EQ(rewrite("RESET application_name", kStartup), "SET application_name TO ''");
  EXPECT_EQ(rewrite("RESET application_name", {{"application_name", "it's"}}),
            "SET application_name TO 'it''s'");
}

TEST(CarriedSettings, OnlyTheResetsOfAMultiStatementTextChange) {
  EXPECT_EQ(rewrite("set datestyle=iso; reset datestyle; select date '2020-01-02'", kStartup),
            "set datestyle=iso; SET DateStyle TO 'Postgres, MDY'; select date '2020-01-02'");
  EXPECT_EQ(rewrite("RESET timezone;RESET datestyle", kStartup),
            "SET TimeZone TO 'Asia/Tokyo';SET DateStyle TO 'Postgres, MDY'");
}

TEST(CarriedSettings, NothingToChange) {
  EXPECT_EQ(rewrite("RESET intervalstyle", kStartup), std::nullopt);
  EXPECT_EQ(rewrite("RESET work_mem", kStartup), std::nullopt);
  EXPECT_EQ(rewrite("RESET ALL", kStartup), std::nullopt);
  EXPECT_EQ(rewrite("SET datestyle = iso", kStartup), std::nullopt);
  EXPECT_EQ(rewrite("SELECT 'RESET datestyle'", kStartup), std::nullopt);
}

TEST(CarriedSettings, DateStyleKeepsTheServersOtherPart) {
  // pgjdbc sends DateStyle=ISO: on a direct login the order stays the server's (MDY here), not
  // the DMY a pooled connection's last client set.
  EXPECT_EQ(pool::completeDateStyle("ISO", "ISO, MDY"), "ISO, MDY");
  EXPECT_EQ(pool::completeDateStyle("DMY", "ISO, MDY"), "ISO, DMY");
  EXPECT_EQ(pool::completeDateStyle("Postgres, DMY", "ISO, MDY"), "Postgres, DMY");
  EXPECT_EQ(pool::completeDateStyle("German", "ISO, MDY"), "German");  // German means DMY
  EXPECT_EQ(pool::completeDateStyle("sql,european", "ISO, MDY"), "sql,european");
  EXPECT_EQ(pool::completeDateStyle("iso", "Postgres, YMD"), "iso, YMD");
  EXPECT_EQ(pool::completeDateStyle("default", "ISO, MDY"), "default");
  EXPECT_EQ(pool::completeDateStyle("ISO,", "ISO, MDY"),
            "ISO,");  // not readable: left to the server
  ParamList p = {{"TimeZone", "UTC"}, {"DateStyle", "ISO"}};
  pool::completeDateStyle(p, "ISO, MDY");
  EXPECT_EQ(p[1].second, "ISO, MDY");
  EXPECT_EQ(p[0].second, "UTC");
}

}  // namespace
}  // namespace pgwarden::daemon
