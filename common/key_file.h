// The small secret files in daemon.state_dir (the salt key, the history chain's keys, the
// masking key): read with a bound, made once under a temporary name and linked into place so a
// crash or a second process never leaves half a key, and checked without creating anything.
// Start-up, reload and command-line use only: these read and write files.
#pragma once

#include <cstddef>
#include <string>

#include "common/result.h"

namespace pgwarden {

// The directory part of `path` ("." without a slash).
std::string dirOf(const std::string& path);

// At most `max_bytes` of the file (the rest is not read).
Result<std::string> readKeyFile(const std::string& path, size_t max_bytes);

// Writes `text` under `path`.tmp.<pid> (mode 0600, synced), then moves it to `path`: with
// `replace` false by link(), which fails when another process created `path` first (that is no
// error: the caller reads the file back); with `replace` true by rename().
Status writeKeyFile(const std::string& path, const std::string& text, bool replace);

// For --check-config: "" when `path` can be read, or does not exist and its directory lets
// pgwarden create it; else why it cannot. Creates nothing.
std::string keyFileProblem(const std::string& path);

// Lower-case hex of `raw`.
std::string toHex(const std::string& raw);

}  // namespace pgwarden
