// What a guarded write holds back while its savepoint and count are settled.
#include "session/write_hold.h"

namespace pgwarden::session {

void WriteHold::holdQuery(std::string query) {
  query_ = std::move(query);
  refusal_.reset();
}

void WriteHold::savepointRefused(std::string_view sqlstate, std::string_view message) {
  refusal_.emplace(std::string(sqlstate), std::string(message));
}

std::optional<std::pair<std::string, std::string>> WriteHold::takeSavepointRefusal() {
  return std::exchange(refusal_, std::nullopt);
}

}  // namespace pgwarden::session
