// libFuzzer target: the startup phase before authentication, where every byte comes from an
// unauthenticated client. Startup-phase packets are parsed from a buffer that grows in chunks (as
// reads arrive), each accepted StartupMessage goes through the startup parameter filter, and the
// `options` parser also sees raw fuzzer text.
#include "protocol/messages.h"
#include "session/startup_params.h"
#include "tests/fuzz/fuzz_util.h"

namespace pgw = pgwarden::protocol;
namespace session = pgwarden::session;
using pgwarden::fuzz::Input;

namespace {

void filter(const pgw::StartupPacket& packet) {
  const session::StartupFilterResult r = session::filterStartupParams(packet.params);
  if (!r.startup) {
    PGW_FUZZ_CHECK(!r.refusal.sqlstate.empty() && !r.refusal.message.empty());
    return;
  }
  const session::ClientStartup& s = *r.startup;
  PGW_FUZZ_CHECK(!s.user.empty() && !s.database.empty());
  PGW_FUZZ_CHECK(s.agent_id.size() <= session::kMaxContextValue);
  PGW_FUZZ_CHECK(s.conversation_id.size() <= session::kMaxContextValue);
  PGW_FUZZ_CHECK(s.query_intent.size() <= session::kMaxContextValue);
  // Only known client parameters are forwarded, by their canonical names, each once.
  for (size_t i = 0; i < s.params.size(); ++i) {
    const char* canonical = session::canonicalClientParam(s.params[i].first);
    PGW_FUZZ_CHECK(canonical != nullptr && s.params[i].first == canonical);
    for (size_t j = 0; j < i; ++j) PGW_FUZZ_CHECK(s.params[j].first != s.params[i].first);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  uint8_t sizes[4];
  for (auto& s : sizes) s = in.byte();
  // The first line goes to the `options` parser as it is; the rest is the byte stream.
  if (auto opts = session::parseOptions(in.until('\n'))) {
    for (const auto& [name, value] : *opts) PGW_FUZZ_CHECK(!name.empty() && name.find('=') == std::string::npos);
  }
  const std::string_view stream = in.rest();

  size_t start = 0, have = 0, turn = 0;
  while (start < stream.size()) {
    Input pick(&sizes[turn++ % 4], 1);
    have += pick.chunk(stream.size() - start - have);
    pgw::StartupPacket packet;
    size_t used = 0;
    std::string error;
    const pgw::StartupStatus st =
        pgw::parseStartup(stream.substr(start, have), packet, used, error);
    if (st == pgw::StartupStatus::kBad) {
      PGW_FUZZ_CHECK(!error.empty());
      return 0;  // the session answers with an error and closes
    }
    if (st == pgw::StartupStatus::kNeedMore) {
      if (start + have >= stream.size()) return 0;
      continue;
    }
    PGW_FUZZ_CHECK(used >= 8 && used <= have && used <= pgw::kMaxStartupPacket);
    if (packet.kind == pgw::StartupKind::kStartup) {
      PGW_FUZZ_CHECK(pgw::protocolMajor(packet.version) == 3);
      filter(packet);
    }
    start += used;
    have -= used;
  }
  return 0;
}
