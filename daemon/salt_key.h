// The key that unknown users' made-up SCRAM salts and md5 hashes are derived from. It has to
// outlive the process: a salt that changed on restart while real users' stay put would tell
// anyone watching which users exist. PostgreSQL keeps its mock salt stable the same way.
#pragma once

#include <string>

#include "daemon/config.h"

namespace pgwarden::daemon {

struct SaltKey {
  std::string key;
  // False when the key is this process's own (the file could be neither read nor created):
  // unknown users' salts then change on restart.
  bool persistent = false;
  std::string warning;  // what went wrong, for the log; "" when nothing did
};

// auth.salt_key when set; else the first line of auth.salt_key_file; a file that does not exist
// yet is created (mode 0600, 32 random bytes as 64 hex digits, written under a temporary name
// and linked into place so a crash or a second process never leaves half a key). When the file
// can be neither read nor created the key is random and `warning` says what that reveals.
// Start-up and reload only: it reads and may write a small file.
SaltKey loadSaltKey(const config::AuthConfig& auth);

// The masked columns' key (docs/masking.md): <daemon.state_dir>/mask.key, read or created once
// like the salt key, given to every group that masks with tokens. "" when done (or when no group
// needs it), else why not: no group can mask without it, so start-up fails and a reload keeps
// the running configuration. `create` false (--check-config): creates nothing, only checks.
std::string giveMaskKey(const config::Config& config, bool create);

// For --check-config: "" when loadSaltKey would find or create the key file, else the warning
// start-up would log. Creates nothing.
std::string checkSaltKey(const config::AuthConfig& auth);

}  // namespace pgwarden::daemon
