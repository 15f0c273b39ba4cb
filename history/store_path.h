// Whether this process can open or create the file a sqlite or jsonl history store writes, asked
// before start-up rather than learnt from a store that fails to open: `pgwarden --check-config`
// and the daemon's start-up and reload give the same answer.
#pragma once

#include "common/result.h"
#include "history/recorder.h"

namespace pgwarden::history {

// OK for stores without a file (postgres, off). Otherwise fails with a sentence naming the file,
// the directory and the user, e.g. "cannot create /x/h.db: the directory /x does not exist".
[[nodiscard]] Status checkStorePath(const HistoryConfig& config);

}  // namespace pgwarden::history
