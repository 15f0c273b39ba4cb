// Write-transaction handles for the sessionless (2026-07-28) requests: `begin` answers with a
// handle the agent passes back as the `transaction` argument. It names the pgwarden instance that
// holds the transaction (a load balancer routes by it), this process's boot, and the transaction's
// holder, and is signed (HMAC-SHA256), so it cannot be forged or turned into another caller's.
// The key is made at start, or read from mcp.handle_key_file: instances sharing that file verify
// each other's handles, so one that does not hold a transaction names its holder only for a handle
// some instance of the fleet really made. Pure functions over the text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pgwarden::mcp {

struct HandleKey {
  std::string instance;  // the config's instance_id
  std::string boot;      // 16 hex digits, new at each start
  std::string secret;    // the HMAC key
  bool shared = false;   // from mcp.handle_key_file: the fleet's instances hold it too
};

// 16 random bytes as 32 hex digits ("" when the RNG fails): session and holder ids.
std::string randomHexId();

// A key with a random boot id, and `shared_secret` (the fleet's) or a random secret when it is
// empty (false from the RNG: none could be made).
bool makeHandleKey(std::string instance, std::string_view shared_secret, HandleKey* out);

// "pgwt1.<instance, base64url>.<boot>.<holder>.<signature, 32 hex digits>"; `holder` is the
// server's id of the transaction's holder (hex digits).
std::string mintTxnHandle(const HandleKey& key, std::string_view holder);

struct HandleCheck {
  enum class Kind : uint8_t {
    kOurs,       // signed by this process: `holder` is the transaction's holder
    kElsewhere,  // names another instance: route the request there
    kRestarted,  // this instance, an earlier process: its transactions were rolled back
    kInvalid,    // not a handle, or its signature does not match (altered, forged, or signed
                 // with another key than the fleet's shared one)
  };
  Kind kind = Kind::kInvalid;
  // kElsewhere, kRestarted: the signature was checked (the key is shared); without a shared key
  // another process's signature cannot be checked, and the handle's own word is all there is.
  bool verified = false;
  std::string instance;  // kOurs, kElsewhere, kRestarted
  std::string holder;    // kOurs
};
HandleCheck checkTxnHandle(const HandleKey& key, std::string_view handle);

}  // namespace pgwarden::mcp
