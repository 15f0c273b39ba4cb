// The few lookups the configuration's structs answer (config/config.h).
#include "config/config.h"

#include <algorithm>

namespace pgwarden::config {

const char* authMethodName(AuthMethod m) {
  switch (m) {
    case AuthMethod::kScramSha256: return "scram-sha-256";
    case AuthMethod::kMd5: return "md5";
    case AuthMethod::kTrust: return "trust";
  }
  return "?";
}

std::shared_ptr<const pool::PoolSettings> poolSettings(const Config& config) {
  auto s = std::make_shared<pool::PoolSettings>();
  s->upstream = config.upstream;
  s->pool = config.pool;
  for (const auto& [name, g] : config.groups) {
    if (g->writes().guarded) {
      s->write_idle_in_transaction =
          std::max(s->write_idle_in_transaction, g->writes().idle_timeout + net::Millis(10000));
    }
  }
  return s;
}

int LimitsConfig::startupCap() const {
  return std::max(1, std::min(max_startup_connections,
                              max_client_connections - reserved_authenticated));
}

const UserConfig* Config::findUser(std::string_view name) const {
  for (const auto& u : users) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

const guards::PolicyGroup* Config::findGroup(std::string_view name) const {
  auto it = groups.find(name);
  return it == groups.end() ? nullptr : it->second.get();
}

bool Config::groupAllowsSearchPath(std::string_view group) const {
  const auto& l = client_parameters.allow_search_path;
  return std::find(l.begin(), l.end(), group) != l.end();
}

bool Config::isAdmin(std::string_view user) const {
  return std::find(admin_users.begin(), admin_users.end(), user) != admin_users.end();
}

bool Config::isStatsUser(std::string_view user) const {
  return std::find(stats_users.begin(), stats_users.end(), user) != stats_users.end();
}

}  // namespace pgwarden::config
