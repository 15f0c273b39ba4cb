// Reference docs that cannot drift: every key the config loader knows is documented in
// pgwarden.yaml(5). The loader's key checks report what they allow (config::setKnownKeysObserver);
// a config that reaches every one of them is parsed, and each allowed key must be in the page.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <cctype>
#include <set>
#include <sstream>

#include "common/config_util.h"
#include "daemon/config.h"
#include "protocol/auth.h"

using namespace pgwarden::daemon;
namespace fs = std::filesystem;

namespace {

struct Site {
  std::set<std::string> paths;
  std::set<std::string> keys;
};
// "folder/file.cpp" -> line -> what was checked there.
std::map<std::string, std::map<unsigned, Site>> g_sites;

void observe(const pgwarden::config::SourceSite& site, const std::string& path,
             const std::vector<std::string>& allowed) {
  std::string file = site.file_name();
  const std::string root = std::string(PGWARDEN_SOURCE_DIR) + "/";
  if (file.rfind(root, 0) == 0) file = file.substr(root.size());
  Site& s = g_sites[file][site.line()];
  s.paths.insert(path);
  s.keys.insert(allowed.begin(), allowed.end());
}

std::string readText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every word the page sets in bold (.B, .BR/.RB/.BI/.IB arguments, \fB...\fR) and every .SS
// heading: where pgwarden.yaml(5) names keys.
std::set<std::string> documentedWords(std::string page) {
  for (size_t at = 0; (at = page.find("\\-", at)) != std::string::npos;) page.erase(at, 1);
  std::set<std::string> words;
  const auto addWords = [&words](const std::string& text) {
    // Identifiers: [A-Za-z_][A-Za-z0-9_]* (no <regex>: GCC 12 warns inside it at -O1).
    const auto head = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
    const auto tail = [&head](char c) { return head(c) || std::isdigit(static_cast<unsigned char>(c)); };
    for (size_t i = 0; i < text.size();) {
      if (!head(text[i])) {
        ++i;
        continue;
      }
      size_t end = i + 1;
      while (end < text.size() && tail(text[end])) ++end;
      words.insert(text.substr(i, end - i));
      i = end;
    }
  };
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(".B ", 0) == 0 || line.rfind(".SS ", 0) == 0 || line.rfind(".TP", 0) == 0) {
      addWords(line.substr(3));
    } else if (line.rfind(".BR ", 0) == 0 || line.rfind(".BI ", 0) == 0) {
      addWords(line.substr(4));  // the bold ones are odd, but a key in either is named
    } else if (line.rfind(".RB ", 0) == 0 || line.rfind(".IB ", 0) == 0) {
      addWords(line.substr(4));
    }
    for (size_t at = 0; (at = line.find("\\fB", at)) != std::string::npos;) {
      const size_t end = line.find("\\f", at + 3);
      addWords(line.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3));
      at += 3;
    }
  }
  return words;
}

// Call sites of the loader's key checks in the source tree, per file.
std::map<std::string, size_t> keyCheckSites() {
  std::map<std::string, size_t> sites;
  const fs::path root = PGWARDEN_SOURCE_DIR;
  for (const char* dir : {"common", "net", "history", "metrics", "guards", "budgets", "screens",
                          "pool", "config", "session", "mcp", "daemon"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (e.path().extension() != ".cpp") continue;
      const std::string rel = fs::relative(e.path(), root).string();
      if (rel == "common/config_util.cpp" || rel == "guards/guard_util.cpp") continue;
      const std::string text = readText(e.path());
      for (const char* call : {"checkKeys(", "checkGuardKeys("}) {
        for (size_t at = 0; (at = text.find(call, at)) != std::string::npos; ++at) {
          // a call, not a longer name ending in it
          const char before = at == 0 ? ' ' : text[at - 1];
          if (!std::isalnum(static_cast<unsigned char>(before)) && before != '_') ++sites[rel];
        }
      }
    }
  }
  return sites;
}

// One config that reaches every key check: each section, each guard kind, each nested map.
// `jwks`: the absolute path of a JWKS file (mcp.oauth reads it while parsing).
std::string everySection(const std::string& verifier, const std::string& jwks) {
  return R"(instance_id: ref
daemon: {state_dir: /tmp, workers: 1}
listen:
  addresses: ["127.0.0.1:6432"]
  unix_socket_dir: /tmp
  so_reuseport: false
upstream:
  host: 127.0.0.1
  port: 5432
  user: reader
  password: pw
  write_user: writer
  write_password: wpw
  replicas: [{host: 127.0.0.2, port: 5433}]
pool: {max_size: 4}
limits: {max_client_connections: 100}
auth: {failed_attempts_per_minute: 10}
client_parameters: {allow_search_path: [agents]}
tls: {mode: allow, cert_file: cert.pem, key_file: key.pem}
users:
  - {name: agent, password: ")" +
         verifier + R"(", group: agents}
  - {name: writer, password: ")" +
         verifier + R"(", group: writers}
admin_users: [agent]
stats_users: [writer]
logging: {level: info, format: text}
metrics: {listen: "127.0.0.1:9187"}
history: {store: sqlite, path: /tmp/pgwarden-reference-history.db}
mcp:
  listen: "127.0.0.1:6433"
  tokens: [{user: agent, sha256: "0000000000000000000000000000000000000000000000000000000000000000"}]
  oauth:
    issuer: https://issuer.example
    audience: https://db.example/mcp
    jwks_file: )" +
         jwks + R"(
    scopes: [{scope: db.read, group: agents}]
tools:
  - name: t
    description: a tool
    groups: [agents]
    parameters: {type: object, properties: {from: {type: string, format: date}, to: {type: string, format: date}}}
    range_caps: [{from: from, to: to, max_days: 7}]
    sql: SELECT 1 WHERE $from::date < $to::date
    plan_check: {deny_seq_scan_on: [public.t]}
groups:
  agents:
    result_assertions:
      - {columns: "*_pct", min: 0, max: 100, tables: [public.t], tools: [t]}
      - {rows: 1}
    soft_delete_columns: [public.t.deleted_on]
    guards:
      - kind: read_only
      - kind: multi_statement
      - kind: functions
      - kind: tables
        deny: [pg_catalog.pg_authid]
      - kind: require_predicate
        min_rows: 1000
      - kind: row_limit
        max_rows: 10
      - kind: cost_gate
        seq_scan_rows: 100000
        max_cost: 1000000
      - kind: lua
        script: "function check(ctx) return nil end"
      - kind: http_webhook
        url: "http://127.0.0.1:9/check"
      - kind: budget
        max_statements: 10
    untrusted_content: {columns: [public.reviews.body], refuse: [writes], refuse_tools: [x]}
  writers:
    mode: guarded_writes
    max_rows_affected: {statement: 10, transaction: 100}
    guards:
      - kind: multi_statement
)";
}

}  // namespace

TEST(ConfigReference, ManPageDocumentsEveryKeyTheLoaderKnows) {
  const fs::path dir = fs::temp_directory_path() / ("pgw-reference-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // tls: loads its certificate while parsing; a throwaway one from the openssl CLI.
  const std::string openssl =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
      "-nodes -days 1 -subj /CN=localhost -keyout " +
      (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(openssl.c_str()), 0) << openssl;
  const std::string verifier =
      pgwarden::protocol::makeScramVerifierWithSalt("secret", "0123456789abcdef", 4096);
  std::ofstream(dir / "jwks.json") << R"({"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1", )"
                                      R"("x": "TZyWqxYAFAnSx7_LBIuadNKHLTSlzeaefodtXyUDLTA", )"
                                      R"("y": "J0w1i6LSoWM8_ceurLfu8Hr-bZJRJoHiitK8uu_kwUM"}]})";

  g_sites.clear();
  pgwarden::config::setKnownKeysObserver(observe);
  try {
    parseConfig(everySection(verifier, (dir / "jwks.json").string()),
                (dir / "pgwarden.yaml").string());
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  pgwarden::config::setKnownKeysObserver(nullptr);
  fs::remove_all(dir);

  // Every key check in the source was reached, so the keys below are all of them.
  for (const auto& [file, count] : keyCheckSites()) {
    EXPECT_EQ(g_sites[file].size(), count)
        << file << ": " << count << " key checks in the source, " << g_sites[file].size()
        << " reached; extend everySection() so that each is reached";
  }

  const std::set<std::string> documented =
      documentedWords(readText(fs::path(PGWARDEN_SOURCE_DIR) / "packaging/man/pgwarden.yaml.5"));
  ASSERT_GT(documented.size(), 50u);
  size_t keys = 0;
  for (const auto& [file, lines] : g_sites) {
    for (const auto& [line, site] : lines) {
      for (const auto& key : site.keys) {
        ++keys;
        EXPECT_TRUE(documented.count(key))
            << "pgwarden.yaml(5) does not document '" << key << "' (allowed under "
            << *site.paths.begin() << ", " << file << ":" << line << ")";
      }
    }
  }
  EXPECT_GT(keys, 150u);
}

// Every key the example configs use is one the loader knows and the page documents: they parse
// (the keys are checked) and the page names each key of theirs.
TEST(ConfigReference, ExampleConfigsUseOnlyDocumentedKeys) {
  const std::set<std::string> documented =
      documentedWords(readText(fs::path(PGWARDEN_SOURCE_DIR) / "packaging/man/pgwarden.yaml.5"));
  std::vector<fs::path> files = {fs::path(PGWARDEN_SOURCE_DIR) / "packaging/pgwarden.yaml"};
  for (const auto& e :
       fs::directory_iterator(fs::path(PGWARDEN_SOURCE_DIR) / "packaging/examples")) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  ASSERT_GE(files.size(), 2u);
  for (const auto& f : files) {
    const YAML::Node root = YAML::LoadFile(f.string());
    // Keys of mappings the loader checks key by key; free-form maps (groups' names, JSON
    // Schemas, webhook headers, result screen and reason codes) are values, not keys.
    std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n,
                                                                          const std::string& path) {
      if (n.IsSequence()) {
        for (const auto& item : n) walk(item, path + "[]");
      }
      if (!n.IsMap()) return;
      for (const auto& kv : n) {
        const std::string key = kv.first.as<std::string>();
        if (path != "groups") {
          EXPECT_TRUE(documented.count(key)) << f.filename() << ": '" << key << "' under '" << path
                                             << "' is not in pgwarden.yaml(5)";
        }
        if (key == "parameters" || key == "headers" || key == "result_screens" ||
            key == "reasons") {
          continue;
        }
        walk(kv.second, path.empty() ? key : path + "." + key);
      }
    };
    walk(root, "");
  }
}
