#include "session/skipped_batch.h"

namespace pgwarden::session {

void SkippedBatch::begin(std::string_view sqlstate, std::string_view reason, size_t max_names) {
  max_names_ = max_names;
  statements_.clear();
  portals_.clear();
  active_ = true;
  sqlstate_.assign(sqlstate);
  message_ = "not executed: ";
  message_.append(reason);
}

void SkippedBatch::end() {
  active_ = false;
  statements_.clear();
  portals_.clear();
}

void SkippedBatch::statement(std::string_view name, Target target) {
  if (statements_.size() >= max_names_ && !statements_.count(std::string(name))) return;
  statements_.insert_or_assign(std::string(name), std::move(target));
}

void SkippedBatch::portal(std::string_view portal, Target target) {
  if (portals_.size() >= max_names_ && !portals_.count(std::string(portal))) return;
  portals_.insert_or_assign(std::string(portal), std::move(target));
}

std::optional<SkippedBatch::Target> SkippedBatch::findStatement(std::string_view name) const {
  const auto it = statements_.find(std::string(name));
  if (it == statements_.end()) return std::nullopt;
  return it->second;
}

SkippedBatch::Lookup SkippedBatch::execute(std::string_view portal) const {
  const auto it = portals_.find(std::string(portal));
  if (it == portals_.end()) return {};
  return {true, it->second};
}

}  // namespace pgwarden::session
