#include "net/net_config.h"

namespace pgwarden::net {

std::optional<std::string> UpstreamConfig::mapDatabase(std::string_view client_db) const {
  if (databases.empty()) return std::string(client_db);
  auto it = databases.find(client_db);
  if (it != databases.end()) return it->second;
  if (databases.count("*")) return std::string(client_db);
  return std::nullopt;
}

}  // namespace pgwarden::net
