// Write-transaction handles for the sessionless (2026-07-28) requests: `begin` answers with a
// handle the agent passes back as the `transaction` argument. It names the pgwarden instance that
// holds the transaction (a load balancer routes by it), this process's boot, and the transaction's
// holder, and is signed (HMAC-SHA256 with a key made at start), so it cannot be forged or turned
// into another caller's. Pure functions over the text.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace pgwarden::mcp {

struct HandleKey {
  std::string instance;  // the config's instance_id
  std::string boot;      // 16 hex digits, new at each start
  std::array<uint8_t, 32> secret{};
};

// 16 random bytes as 32 hex digits ("" when the RNG fails): session and holder ids.
std::string randomHexId();

// A key with a random boot id and secret (false from the RNG: none could be made).
bool makeHandleKey(std::string instance, HandleKey* out);

// "pgwt1.<instance, base64url>.<boot>.<holder>.<signature, 32 hex digits>"; `holder` is the
// server's id of the transaction's holder (hex digits).
std::string mintTxnHandle(const HandleKey& key, std::string_view holder);

struct HandleCheck {
  enum class Kind : uint8_t {
    kOurs,       // signed by this process: `holder` is the transaction's holder
    kElsewhere,  // names another instance: route the request there
    kRestarted,  // this instance, an earlier process: its transactions were rolled back
    kInvalid,    // not a handle, or its signature does not match (altered or forged)
  };
  Kind kind = Kind::kInvalid;
  std::string instance;  // kOurs, kElsewhere, kRestarted
  std::string holder;    // kOurs
};
HandleCheck checkTxnHandle(const HandleKey& key, std::string_view handle);

}  // namespace pgwarden::mcp
