// Config parsing and validation: defaults, every error naming file, line and dotted key, the
// cross-references between users, groups and admin users, and the auth section.
#include "daemon/config.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>

#include <fstream>

#include "protocol/auth.h"

using namespace pgwarden;
using namespace pgwarden::daemon;

namespace {

std::string verifier() {
  return pgwarden::protocol::makeScramVerifierWithSalt("secret", "0123456789abcdef", 4096);
}

std::string baseConfig() {
  return "upstream:\n"                        // 1
         "  host: 127.0.0.1\n"                // 2
         "  port: 5433\n"                     // 3
         "  user: reader\n"                   // 4
         "  password: pw\n"                   // 5
         "users:\n"                           // 6
         "  - name: agent\n"                  // 7
         "    password: \"" + verifier() + "\"\n"  // 8
         "    group: agents\n"                // 9
         "groups:\n"                          // 10
         "  agents:\n"                        // 11
         "    guards:\n"                      // 12
         "      - kind: read_only\n";         // 13
}

// The error text for `text`, or "" when it parses.
std::string errorOf(const std::string& text) {
  try {
    parseConfig(text, "test.yaml");
    return "";
  } catch (const ConfigFileError& e) {
    return e.what();
  }
}

}  // namespace

TEST(Config, MinimalConfigGetsDefaults) {
  auto c = parseConfig(baseConfig(), "test.yaml");
  EXPECT_EQ(c->upstream.port, 5433);
  EXPECT_EQ(c->upstream.password, "pw");
  EXPECT_EQ(c->upstream.statement_timeout.count(), 10000);
  EXPECT_EQ(c->upstream.lock_timeout.count(), 3000);
  EXPECT_EQ(c->upstream.idle_in_transaction_session_timeout.count(), 15000);
  ASSERT_EQ(c->listen.addresses.size(), 1u);
  EXPECT_EQ(c->listen.addresses[0].host, "127.0.0.1");
  EXPECT_EQ(c->listen.addresses[0].port, 6432);
  EXPECT_EQ(c->limits.max_message_bytes, 1u << 20);
  EXPECT_EQ(c->pool.max_size, 20);
  ASSERT_EQ(c->users.size(), 1u);
  EXPECT_EQ(c->users[0].method, config::AuthMethod::kScramSha256);
  EXPECT_NE(c->findGroup("agents"), nullptr);
  EXPECT_EQ(c->findUser("nobody"), nullptr);
  EXPECT_FALSE(c->instance_id.empty());
}

TEST(Config, UnknownKeyNamesFileLineAndKey) {
  std::string text = baseConfig();
  text.insert(text.find("  user: reader"), "  conect_timeout: 5s\n");  // becomes line 4
  const auto err = errorOf(text);
  EXPECT_EQ(err.rfind("test.yaml:4: upstream.conect_timeout: ", 0), 0u) << err;
  EXPECT_NE(err.find("unknown key"), std::string::npos) << err;
}

TEST(Config, UnknownTopLevelKey) {
  const auto err = errorOf(baseConfig() + "listeners: []\n");
  EXPECT_EQ(err.rfind("test.yaml:14: listeners: ", 0), 0u) << err;
}

TEST(Config, UserGroupMustExist) {
  std::string text = baseConfig();
  text.replace(text.find("group: agents"), 13, "group: nope");
  const auto err = errorOf(text);
  EXPECT_EQ(err.rfind("test.yaml:9: users[0].group: ", 0), 0u) << err;
  EXPECT_NE(err.find("\"nope\""), std::string::npos) << err;
  EXPECT_NE(err.find("agents"), std::string::npos) << "lists the defined groups: " << err;
}

TEST(Config, PlainPasswordsAreRefused) {
  std::string text = baseConfig();
  text.replace(text.find("\"SCRAM"), verifier().size() + 2, "hunter2");
  const auto err = errorOf(text);
  EXPECT_EQ(err.rfind("test.yaml:8: users[0].password: ", 0), 0u) << err;
  EXPECT_EQ(err.find("hunter2"), std::string::npos) << "never echo a password: " << err;
}

TEST(Config, BrokenVerifierIsRefused) {
  std::string text = baseConfig();
  text.replace(text.find("\"SCRAM"), verifier().size() + 2,
               "\"SCRAM-SHA-256$4096:c2FsdA==$REPLACE_ME:REPLACE_ME\"");
  EXPECT_NE(errorOf(text).find("users[0].password"), std::string::npos);
}

TEST(Config, Md5AndTrustUsers) {
  const std::string text = baseConfig().substr(0, baseConfig().find("groups:")) +
                           "  - name: m\n"
                           "    password: md5" + std::string(32, 'a') + "\n"
                           "    group: agents\n"
                           "  - name: t\n"
                           "    method: trust\n"
                           "    group: agents\n" +
                           baseConfig().substr(baseConfig().find("groups:"));
  auto c = parseConfig(text, "test.yaml");
  EXPECT_EQ(c->findUser("m")->method, config::AuthMethod::kMd5);
  EXPECT_EQ(c->findUser("t")->method, config::AuthMethod::kTrust);
}

TEST(Config, TrustTakesNoPassword) {
  std::string text = baseConfig();
  text.insert(text.find("    group: agents"), "    method: trust\n");
  EXPECT_NE(errorOf(text).find("users[0].password"), std::string::npos);
}

TEST(Config, DuplicateUser) {
  const std::string text = baseConfig().substr(0, baseConfig().find("groups:")) +
                           "  - name: agent\n    method: trust\n    group: agents\n" +
                           baseConfig().substr(baseConfig().find("groups:"));
  const auto err = errorOf(text);
  EXPECT_EQ(err.rfind("test.yaml:10: users[1].name: ", 0), 0u) << err;
}

TEST(Config, AdminUsersMustBeUsers) {
  const auto err = errorOf(baseConfig() + "admin_users: [root]\n");
  EXPECT_NE(err.find("admin_users"), std::string::npos) << err;
  EXPECT_NE(err.find("root"), std::string::npos) << err;
  EXPECT_EQ(errorOf(baseConfig() + "admin_users: [agent]\n"), "");
}

TEST(Config, SearchPathGroupsMustExist) {
  EXPECT_NE(errorOf(baseConfig() + "client_parameters:\n  allow_search_path: [x]\n")
                .find("client_parameters.allow_search_path"),
            std::string::npos);
  auto c = parseConfig(baseConfig() + "client_parameters:\n  allow_search_path: [agents]\n",
                       "test.yaml");
  EXPECT_TRUE(c->groupAllowsSearchPath("agents"));
}

TEST(Config, TypedValuesAreChecked) {
  std::string text = baseConfig();
  text.replace(text.find("port: 5433"), 10, "port: many");
  EXPECT_NE(errorOf(text).find("test.yaml:3: upstream.port"), std::string::npos);
  EXPECT_NE(errorOf(baseConfig() + "limits:\n  max_message_bytes: lots\n")
                .find("limits.max_message_bytes"),
            std::string::npos);
  EXPECT_NE(errorOf(baseConfig() + "pool:\n  acquire_timeout: soon\n").find("pool.acquire_timeout"),
            std::string::npos);
  EXPECT_NE(errorOf(baseConfig() + "logging:\n  level: loud\n").find("logging.level"),
            std::string::npos);
}

TEST(Config, InvalidYamlNamesTheLine) {
  const auto err = errorOf("upstream:\n  host: [unclosed\n");
  EXPECT_EQ(err.rfind("test.yaml:", 0), 0u) << err;
  EXPECT_NE(err.find("YAML"), std::string::npos) << err;
}

TEST(Config, UpstreamRequired) {
  EXPECT_NE(errorOf("groups:\n  a:\n    guards: []\n").find("upstream"), std::string::npos);
}

TEST(Config, PasswordAndPasswordFileExclusive) {
  std::string text = baseConfig();
  text.insert(text.find("users:"), "  password_file: pw.txt\n");
  EXPECT_NE(errorOf(text).find("upstream.password_file"), std::string::npos);
}

TEST(Config, PasswordFileIsReadRelativeToTheConfig) {
  const std::string dir = ::testing::TempDir();
  { std::ofstream(dir + "/upstream.pw") << "from-file\n"; }
  std::string text = baseConfig();
  text.replace(text.find("  password: pw\n"), 15, "  password_file: upstream.pw\n");
  auto c = parseConfig(text, dir + "/pgwarden.yaml");
  EXPECT_EQ(c->upstream.password, "from-file");
  EXPECT_TRUE(c->warnings.empty());
  // A file not there yet is a warning (packaged configs), not an error.
  text.replace(text.find("upstream.pw"), 11, "missing.pw");
  auto m = parseConfig(text, dir + "/pgwarden.yaml");
  EXPECT_TRUE(m->upstream.password.empty());
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_NE(m->warnings[0].find("upstream.password_file"), std::string::npos);
}

TEST(Config, DatabaseMap) {
  auto c = parseConfig(baseConfig() + "", "t.yaml");
  EXPECT_EQ(*c->upstream.mapDatabase("anything"), "anything");
  std::string text = baseConfig();
  text.insert(text.find("users:"), "  databases:\n    analytics: analytics_prod\n");
  auto m = parseConfig(text, "t.yaml");
  EXPECT_EQ(*m->upstream.mapDatabase("analytics"), "analytics_prod");
  EXPECT_FALSE(m->upstream.mapDatabase("other"));
  text.insert(text.find("users:"), "    \"*\": \"*\"\n");
  auto w = parseConfig(text, "t.yaml");
  EXPECT_EQ(*w->upstream.mapDatabase("other"), "other");
}

TEST(ListenAddress, Forms) {
  auto v4 = parseListenAddress("127.0.0.1:6432");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ((*v4)[0].host, "127.0.0.1");
  EXPECT_EQ((*v4)[0].port, 6432);
  auto v6 = parseListenAddress("[::1]:7000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ((*v6)[0].host, "::1");
  auto any = parseListenAddress("*:6432");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->size(), 2u);
  auto local = parseListenAddress("localhost:6432");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->size(), 2u);
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:notaport", "127.0.0.1:70000",
                          "::1:6432", "[::1]6432", "db.example.com:6432"}) {
    EXPECT_FALSE(parseListenAddress(bad).ok()) << bad;
  }
}

TEST(Config, ListenErrorsNameTheKey) {
  const auto err = errorOf(baseConfig() + "listen:\n  addresses: [\"127.0.0.1:notaport\"]\n");
  EXPECT_NE(err.find("listen.addresses"), std::string::npos) << err;
}

// yaml-cpp keeps both entries of a key written twice and every lookup finds the first, so the
// second would be ignored without a word: a duplicate is an error naming the key and both lines.
TEST(Config, DuplicateTopLevelKeyNamesBothLines) {
  const auto err = errorOf(baseConfig() + "pool:\n  max_size: 5\npool:\n  max_size: 7\n");
  EXPECT_EQ(err.rfind("test.yaml:16: pool: ", 0), 0u) << err;
  EXPECT_NE(err.find("duplicate key 'pool' at lines 14 and 16"), std::string::npos) << err;
}

TEST(Config, DuplicateKeyInsideAUserEntryNamesBothLines) {
  std::string text = baseConfig();
  text.insert(text.find("    password: \"SCRAM"), "    name: other\n");  // becomes line 8
  const auto err = errorOf(text);
  EXPECT_EQ(err.rfind("test.yaml:8: users[0].name: ", 0), 0u) << err;
  EXPECT_NE(err.find("duplicate key 'name' at lines 7 and 8"), std::string::npos) << err;
}

TEST(Config, DuplicateKeyDeepInAGroupIsFound) {
  const auto err = errorOf(baseConfig() + "        action: warn\n        action: deny\n");
  EXPECT_EQ(err.rfind("test.yaml:15: groups.agents.guards[0].action: ", 0), 0u) << err;
}

TEST(Config, AliasesCannotBlowUpTheDuplicateCheck) {
  // Nine levels of ten aliases name 10^9 nodes in a few hundred bytes.
  std::string text = baseConfig() + "l0: &l0 [x]\n";
  for (int i = 1; i <= 9; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", " : "") + prev;
    text += "]\n";
  }
  const auto err = errorOf(text);
  EXPECT_NE(err.find("expands to more than"), std::string::npos) << err;
}

namespace {

// Writes `text` to a fresh file and loads it as the daemon does; "" when it loads.
std::string loadErrorOf(const std::string& text, std::string* file = nullptr) {
  const std::string path = ::testing::TempDir() + "/pgwarden-load-test.yaml";
  { std::ofstream(path) << text; }
  if (file) *file = path;
  try {
    loadConfig(path);
    return "";
  } catch (const ConfigFileError& e) {
    return e.what();
  }
}

}  // namespace

TEST(Config, HistoryPathInAMissingDirectoryFailsTheLoad) {
  const std::string text =
      baseConfig() + "history:\n  store: sqlite\n  path: /nonexistent/dir/h.db\n";  // line 16
  EXPECT_NO_THROW(parseConfig(text, "test.yaml")) << "parsing alone looks at no history file";
  std::string file;
  const auto err = loadErrorOf(text, &file);
  EXPECT_EQ(err, file + ":16: history.path: cannot create /nonexistent/dir/h.db: the directory "
                        "/nonexistent/dir does not exist");
}

TEST(Config, HistoryPathThatIsADirectoryFailsTheLoad) {
  const std::string dir = ::testing::TempDir();
  const auto err = loadErrorOf(baseConfig() + "history:\n  store: jsonl\n  path: " + dir + "\n");
  EXPECT_NE(err.find(":16: history.path: cannot open " + dir + ": it is a directory"),
            std::string::npos)
      << err;
}

TEST(Config, HistoryPathThatCanBeCreatedLoads) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(loadErrorOf(baseConfig() + "history:\n  store: sqlite\n  path: " + dir + "/h.db\n"), "");
  EXPECT_EQ(loadErrorOf(baseConfig() + "history:\n  store: jsonl\n  path: " + dir + "/h.jsonl\n"), "");
  // No file to check for these stores.
  EXPECT_EQ(loadErrorOf(baseConfig() + "history:\n  store: \"off\"\n"), "");
}

TEST(Config, HistoryDsnMustParseAndIsNotEchoed) {
  const auto err = errorOf(baseConfig() +
                           "history:\n  store: postgres\n  dsn: \"host=h password=s3cr3t-pw oops\"\n");
  EXPECT_EQ(err.rfind("test.yaml:16: history.dsn: not a valid connection string", 0), 0u) << err;
  EXPECT_EQ(err.find("s3cr3t"), std::string::npos) << err;
  EXPECT_EQ(err.find("oops"), std::string::npos) << err;
  EXPECT_NE(errorOf(baseConfig() + "history:\n  store: postgres\n  dsn: \"host=h nosuchoption=1\"\n")
                .find("history.dsn: not a valid connection string"),
            std::string::npos);
  EXPECT_EQ(errorOf(baseConfig() + "history:\n  store: postgres\n  dsn: \"host=h dbname=x\"\n"), "");
  EXPECT_EQ(errorOf(baseConfig() + "history:\n  store: postgres\n  dsn: postgresql://u@h:5432/x\n"), "");
}

TEST(Config, StartupLimitsAndTheReserveForLoggedInSessions) {
  auto c = parseConfig(baseConfig(), "test.yaml");
  EXPECT_EQ(c->limits.max_startup_connections, 64);
  EXPECT_EQ(c->limits.max_startup_per_address, 16);
  EXPECT_EQ(c->limits.reserved_authenticated, 10);
  EXPECT_EQ(c->limits.startupCap(), 64);
  // A small max_client_connections gets a proportionally small reserve by default...
  c = parseConfig(baseConfig() + "limits:\n  max_client_connections: 30\n", "test.yaml");
  EXPECT_EQ(c->limits.reserved_authenticated, 3);
  EXPECT_EQ(c->limits.startupCap(), 27);
  c = parseConfig(baseConfig() + "limits:\n  max_client_connections: 3\n", "test.yaml");
  EXPECT_EQ(c->limits.reserved_authenticated, 0);
  EXPECT_EQ(c->limits.startupCap(), 3);
  // ... and an explicit one must leave room for someone to log in.
  c = parseConfig(baseConfig() + "limits:\n  max_client_connections: 100\n"
                                 "  reserved_authenticated: 40\n  max_startup_per_address: 0\n",
                  "test.yaml");
  EXPECT_EQ(c->limits.startupCap(), 60);
  EXPECT_EQ(c->limits.max_startup_per_address, 0);
  const auto err = errorOf(baseConfig() + "limits:\n  max_client_connections: 100\n"
                                          "  reserved_authenticated: 100\n");
  EXPECT_NE(err.find("test.yaml:16: limits.reserved_authenticated: must be below"),
            std::string::npos)
      << err;
  EXPECT_NE(errorOf(baseConfig() + "limits:\n  max_startup_connections: 0\n")
                .find("limits.max_startup_connections"),
            std::string::npos);
}

TEST(Config, ClientStallTimeoutDefaultsToThirtySecondsAndIsOffOrAtLeastOneSecond) {
  EXPECT_EQ(parseConfig(baseConfig(), "test.yaml")->limits.client_stall_timeout.count(), 30000);
  auto c = parseConfig(baseConfig() + "limits:\n  client_stall_timeout: 0\n", "test.yaml");
  EXPECT_EQ(c->limits.client_stall_timeout.count(), 0);
  c = parseConfig(baseConfig() + "limits:\n  client_stall_timeout: 2s\n", "test.yaml");
  EXPECT_EQ(c->limits.client_stall_timeout.count(), 2000);
  const auto err = errorOf(baseConfig() + "limits:\n  client_stall_timeout: 200ms\n");
  EXPECT_NE(err.find("test.yaml:15: limits.client_stall_timeout: must be 0 (off) or at least 1s"),
            std::string::npos)
      << err;
}

// Guarded writes (docs/writes.md): a write group needs upstream.write_user, a role other than the
// read-only one; its password comes from write_password or write_password_file.
TEST(Config, WriteGroupsNeedTheirOwnWriteRole) {
  const std::string group = "  writers:\n    mode: guarded_writes\n";
  const auto missing = errorOf(baseConfig() + group);
  EXPECT_NE(missing.find("upstream.write_user"), std::string::npos) << missing;
  EXPECT_NE(missing.find("writers"), std::string::npos) << missing;
  std::string same = baseConfig() + group;
  same.insert(same.find("users:"), "  write_user: reader\n");
  EXPECT_NE(errorOf(same).find("must be a role other than upstream.user"), std::string::npos);
  std::string both = baseConfig();
  both.insert(both.find("users:"), "  write_user: writer\n  write_password: a\n  write_password_file: b\n");
  EXPECT_NE(errorOf(both).find("upstream.write_password_file"), std::string::npos);
  std::string ok = baseConfig() + group;
  ok.insert(ok.find("users:"), "  write_user: writer\n  write_password: wpw\n");
  auto c = parseConfig(ok, "t.yaml");
  EXPECT_EQ(c->upstream.write_user, "writer");
  EXPECT_EQ(c->upstream.write_password, "wpw");
  EXPECT_TRUE(c->findGroup("writers")->writes().guarded);
  EXPECT_FALSE(c->findGroup("agents")->writes().guarded);
}

TEST(Config, WorkersAreAutoByDefaultANumberOrAuto) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cpus = std::min(CPU_COUNT(&set), config::DaemonSection::kMaxWorkers);
  EXPECT_EQ(parseConfig(baseConfig(), "test.yaml")->daemon.workers, cpus);
  EXPECT_EQ(parseConfig(baseConfig() + "daemon:\n  state_dir: /tmp\n", "test.yaml")->daemon.workers,
            cpus);
  EXPECT_EQ(parseConfig(baseConfig() + "daemon:\n  workers: 1\n", "test.yaml")->daemon.workers, 1);
  EXPECT_EQ(parseConfig(baseConfig() + "daemon:\n  workers: 3\n", "test.yaml")->daemon.workers, 3);
  const int autoWorkers = parseConfig(baseConfig() + "daemon:\n  workers: auto\n", "test.yaml")->daemon.workers;
  EXPECT_EQ(autoWorkers, cpus);
  for (const char* bad : {"0", "65", "many", "-1"}) {
    const std::string err = errorOf(baseConfig() + "daemon:\n  workers: " + bad + "\n");
    EXPECT_NE(err.find("daemon.workers"), std::string::npos) << bad << ": " << err;
  }
}

TEST(Config, SecretsFromTheEnvironment) {
  ::setenv("PGW_TEST_UPSTREAM_PASSWORD", "from-env", 1);
  std::string text = baseConfig();
  text.replace(text.find("password: pw"), 12, "password: ${PGW_TEST_UPSTREAM_PASSWORD}");
  EXPECT_EQ(parseConfig(text, "test.yaml")->upstream.password, "from-env");
  ::unsetenv("PGW_TEST_UPSTREAM_PASSWORD");
  EXPECT_EQ(errorOf(text),
            "test.yaml:5: upstream.password: environment variable PGW_TEST_UPSTREAM_PASSWORD is "
            "not set");
  // A group's guards are the policy: never read from the environment.
  std::string policy = baseConfig();
  policy.replace(policy.find("kind: read_only"), 15, "kind: ${PGW_TEST_UPSTREAM_PASSWORD}");
  EXPECT_NE(errorOf(policy).find("test.yaml:13: groups.agents.guards[0].kind: "
                                 "${PGW_TEST_UPSTREAM_PASSWORD}: environment variables are not "
                                 "expanded here"),
            std::string::npos)
      << errorOf(policy);
}

namespace {

// baseConfig() with `replicas` (the lines of the upstream.replicas list, from line 7) and `extra`
// (more upstream keys, after the list) in its upstream section.
std::string withReplicas(const std::string& replicas, const std::string& extra = "") {
  std::string text = baseConfig();
  text.insert(text.find("users:\n"), "  replicas:\n" + replicas + extra);  // the list from line 7
  return text;
}

}  // namespace

TEST(ConfigReplicas, AListOfHostsWithThePrimarysPortByDefaultAndTheirSettings) {
  auto c = parseConfig(withReplicas("    - host: 10.0.0.2\n"
                                    "    - host: 10.0.0.3\n"
                                    "      port: 5434\n",
                                    "  max_replica_lag: 2500ms\n"
                                    "  health_check_interval: 250ms\n"
                                    "  health_check_database: monitor\n"),
                       "test.yaml");
  ASSERT_EQ(c->upstream.replicas.size(), 2u);
  EXPECT_EQ(c->upstream.replicas[0].name(), "10.0.0.2:5433");
  EXPECT_EQ(c->upstream.replicas[1].name(), "10.0.0.3:5434");
  EXPECT_EQ(c->upstream.max_replica_lag.count(), 2500);
  EXPECT_EQ(c->upstream.health_check_interval.count(), 250);
  EXPECT_EQ(c->upstream.health_check_database, "monitor");
  auto none = parseConfig(baseConfig(), "test.yaml");
  EXPECT_TRUE(none->upstream.replicas.empty());
  EXPECT_EQ(none->upstream.max_replica_lag.count(), 10000);
  EXPECT_EQ(parseConfig(withReplicas("    - host: r1\n", "  max_replica_lag: 2m\n"), "test.yaml")
                ->upstream.max_replica_lag.count(),
            120000);
}

TEST(ConfigReplicas, ABadHostNamesItsLineAndKey) {
  std::string err = errorOf(withReplicas("    - port: 5434\n"));
  EXPECT_EQ(err.rfind("test.yaml:7: upstream.replicas[0].host: ", 0), 0u) << err;
  EXPECT_NE(err.find("every replica needs a host"), std::string::npos) << err;
  err = errorOf(withReplicas("    - host: r1\n    - host: \"\"\n"));
  EXPECT_EQ(err.rfind("test.yaml:8: upstream.replicas[1].host: ", 0), 0u) << err;
  err = errorOf(withReplicas("    - host: [r1, r2]\n"));
  EXPECT_EQ(err.rfind("test.yaml:7: upstream.replicas[0].host: ", 0), 0u) << err;
  err = errorOf(withReplicas("    - hots: r1\n"));
  EXPECT_EQ(err.rfind("test.yaml:7: upstream.replicas[0].hots: ", 0), 0u) << err;
  EXPECT_NE(err.find("unknown key"), std::string::npos) << err;
  err = errorOf(withReplicas("    host: r1\n"));
  EXPECT_EQ(err.rfind("test.yaml:7: upstream.replicas: ", 0), 0u) << "a map, not a list: " << err;
  err = errorOf(withReplicas("    - r1:5434\n"));
  EXPECT_EQ(err.rfind("test.yaml:7: upstream.replicas[0]: ", 0), 0u)
      << "a string, not a map: " << err;
}

TEST(ConfigReplicas, ABadPortNamesItsLineAndKey) {
  for (const char* port : {"0", "65536", "-1", "abc", "5432.5"}) {
    const std::string err =
        errorOf(withReplicas(std::string("    - host: r1\n      port: ") + port + "\n"));
    EXPECT_EQ(err.rfind("test.yaml:8: upstream.replicas[0].port: ", 0), 0u) << port << ": " << err;
  }
}

TEST(ConfigReplicas, AHostListedTwiceOrThePrimaryAsAReplicaIsRefused) {
  std::string err =
      errorOf(withReplicas("    - host: r1\n"
                           "    - host: r2\n"
                           "    - host: r1\n"
                           "      port: 5433\n"));
  EXPECT_EQ(err.rfind("test.yaml:9: upstream.replicas[2]: ", 0), 0u) << err;
  EXPECT_NE(err.find("r1:5433 is listed twice"), std::string::npos) << err;
  err = errorOf(withReplicas("    - host: 127.0.0.1\n"));
  EXPECT_EQ(err.rfind("test.yaml:7: upstream.replicas[0]: ", 0), 0u) << err;
  EXPECT_NE(err.find("the primary is upstream.host"), std::string::npos) << err;
  // The same host on another port is another server.
  EXPECT_EQ(errorOf(withReplicas("    - host: 127.0.0.1\n      port: 5434\n")), "");
}

TEST(ConfigReplicas, DurationsNeedAUnitAndTheIntervalAFloor) {
  for (const char* lag : {"1.5s", "ten seconds", "5 parsecs", "-1s", "[1s]", "10 ms ago"}) {
    const std::string err =
        errorOf(withReplicas("    - host: r1\n", std::string("  max_replica_lag: ") + lag + "\n"));
    EXPECT_EQ(err.rfind("test.yaml:8: upstream.max_replica_lag: ", 0), 0u) << lag << ": " << err;
    EXPECT_NE(err.find("expected a duration like 500ms, 10s or 5m"), std::string::npos) << err;
  }
  // A bare number is seconds, as for every duration; 0 would read from no replica.
  EXPECT_EQ(parseConfig(withReplicas("    - host: r1\n", "  max_replica_lag: 3\n"), "test.yaml")
                ->upstream.max_replica_lag.count(),
            3000);
  std::string zero = errorOf(withReplicas("    - host: r1\n", "  max_replica_lag: 0ms\n"));
  EXPECT_EQ(zero.rfind("test.yaml:8: upstream.max_replica_lag: ", 0), 0u) << zero;
  EXPECT_NE(zero.find("must be more than 0"), std::string::npos) << zero;
  const std::string err =
      errorOf(withReplicas("    - host: r1\n", "  health_check_interval: 50ms\n"));
  EXPECT_EQ(err.rfind("test.yaml:8: upstream.health_check_interval: ", 0), 0u) << err;
  EXPECT_NE(err.find("at least 100ms"), std::string::npos) << err;
}

// ---- the auth settings that keep unknown users indistinguishable: unknown_user_method, the salt
// key's settings, the shape of the made-up SCRAM challenge, and the warning when some users' method
// gives them away ----

namespace pgwarden::daemon {
namespace {

std::string scram(int iterations, const std::string& salt = "0123456789abcdef") {
  return protocol::makeScramVerifierWithSalt("pw", salt, iterations);
}

// A config with the given `auth:` body (may be empty) and users.
std::string configWith(const std::string& auth, const std::string& users,
                       const std::string& extra = "") {
  return "upstream:\n  host: 127.0.0.1\n  user: reader\n  password: pw\n" + extra +
         (auth.empty() ? "" : "auth:\n" + auth) + "users:\n" + users +
         "groups:\n  agents:\n    guards:\n      - kind: read_only\n";
}

std::string scramUser(const std::string& name, int iterations) {
  return "  - name: " + name + "\n    password: \"" + scram(iterations) + "\"\n    group: agents\n";
}

std::string md5User(const std::string& name) {
  return "  - name: " + name + "\n    password: " + protocol::md5Verifier(name, "pw") +
         "\n    group: agents\n";
}

std::string errorOf(const std::string& text) {
  try {
    parseConfig(text, "/etc/pgwarden/pgwarden.yaml");
    return "";
  } catch (const ConfigFileError& e) {
    return e.what();
  }
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

TEST(AuthConfig, Defaults) {
  auto c = parseConfig(configWith("", scramUser("a", 4096)), "/etc/pgwarden/pgwarden.yaml");
  EXPECT_EQ(c->auth.unknown_user_method, config::AuthMethod::kScramSha256);
  EXPECT_EQ(c->daemon.state_dir, "/var/lib/pgwarden");
  EXPECT_EQ(c->auth.salt_key_file, "/var/lib/pgwarden/salt.key");
  EXPECT_TRUE(c->auth.salt_key.empty());
  EXPECT_EQ(c->history.path, "/var/lib/pgwarden/history.db");
  EXPECT_TRUE(c->warnings.empty()) << joined(c->warnings);
}

TEST(AuthConfig, StateDirIsRelativeToTheConfigAndCarriesTheDefaults) {
  auto c = parseConfig(configWith("", scramUser("a", 4096), "daemon:\n  state_dir: state/\n"),
                       "/etc/pgwarden/pgwarden.yaml");
  EXPECT_EQ(c->daemon.state_dir, "/etc/pgwarden/state");
  EXPECT_EQ(c->auth.salt_key_file, "/etc/pgwarden/state/salt.key");
  EXPECT_EQ(c->history.path, "/etc/pgwarden/state/history.db");
  EXPECT_NE(errorOf(configWith("", scramUser("a", 4096), "daemon:\n  state_dir: \"\"\n"))
                .find("daemon.state_dir"),
            std::string::npos);
}

TEST(AuthConfig, UnknownUserMethodValues) {
  auto c = parseConfig(configWith("  unknown_user_method: md5\n", md5User("m")), "t.yaml");
  EXPECT_EQ(c->auth.unknown_user_method, config::AuthMethod::kMd5);
  const std::string e = errorOf(configWith("  unknown_user_method: trust\n", md5User("m")));
  EXPECT_NE(e.find(":6: auth.unknown_user_method: unknown method 'trust'"), std::string::npos) << e;
}

TEST(AuthConfig, SaltKeyIsCheckedAndExclusiveWithTheFile) {
  auto c =
      parseConfig(configWith("  salt_key: a-long-enough-secret\n", scramUser("a", 4096)), "t.yaml");
  EXPECT_EQ(c->auth.salt_key, "a-long-enough-secret");
  EXPECT_TRUE(c->auth.salt_key_file.empty());
  EXPECT_NE(errorOf(configWith("  salt_key: short\n", scramUser("a", 4096))).find("auth.salt_key"),
            std::string::npos);
  EXPECT_NE(errorOf(configWith("  salt_key: a-long-enough-secret\n  salt_key_file: k\n",
                               scramUser("a", 4096)))
                .find("auth.salt_key_file: set either"),
            std::string::npos);
  auto f = parseConfig(configWith("  salt_key_file: keys/salt\n", scramUser("a", 4096)),
                       "/etc/pgwarden/pgwarden.yaml");
  EXPECT_EQ(f->auth.salt_key_file, "/etc/pgwarden/keys/salt");
}

TEST(AuthConfig, MadeUpScramChallengeTakesTheCommonestShape) {
  auto c = parseConfig(configWith("", scramUser("a", 10000) + scramUser("b", 10000) +
                                          scramUser("c", 4096) + md5User("m")),
                       "t.yaml");
  EXPECT_EQ(c->auth.unknown_scram_iterations, 10000);
  EXPECT_EQ(c->auth.unknown_scram_salt_len, 16u);
  auto none = parseConfig(configWith("  unknown_user_method: md5\n", md5User("m")), "t.yaml");
  EXPECT_EQ(none->auth.unknown_scram_iterations, 4096);  // PostgreSQL's default
}

TEST(AuthConfig, Md5UsersUnderScramAreNamedInAWarning) {
  auto c = parseConfig(configWith("", scramUser("a", 4096) + md5User("legacy")), "t.yaml");
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("md5 reveals which users exist: \"legacy\" uses md5"),
            std::string::npos)
      << c->warnings[0];
  // All md5 and unknown users answered with md5: nothing to tell apart.
  auto m = parseConfig(configWith("  unknown_user_method: md5\n", md5User("legacy")), "t.yaml");
  EXPECT_TRUE(m->warnings.empty()) << joined(m->warnings);
  // The other way round: SCRAM users stand out when unknown users get md5.
  auto s = parseConfig(
      configWith("  unknown_user_method: md5\n", scramUser("a", 4096) + md5User("legacy")),
      "t.yaml");
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_NE(s->warnings[0].find("\"a\" gets the SCRAM-SHA-256 challenge"), std::string::npos)
      << s->warnings[0];
}

}  // namespace
}  // namespace pgwarden::daemon
