// Process figures read at scrape time (memory, file descriptors, CPU, start time) and the build
// info series, registered into a metrics registry under the pgwarden_process_* names.
#pragma once

#include <cstdint>
#include <optional>

#include "metrics/metrics.h"

namespace pgwarden::metrics {

struct ProcessStats {
  std::optional<double> resident_memory_bytes;
  std::optional<double> virtual_memory_bytes;
  std::optional<double> open_fds;
  std::optional<double> max_fds;
  std::optional<double> cpu_seconds;
};

// Reads the current figures from /proc/self and getrusage(). Each read is a procfs read (memory,
// not disk), cheap enough to run on the event loop once per scrape.
ProcessStats readProcessStats();
// Unix time the process started (from /proc/self/stat and the boot time), or nullopt.
std::optional<double> readProcessStartTime();

// Registers pgwarden_process_{resident_memory_bytes, virtual_memory_bytes, open_fds, max_fds,
// cpu_seconds_total, start_time_seconds} and pgwarden_build_info{version,git_sha} 1.
void registerProcessMetrics(Registry& registry, const BuildInfo& build);

}  // namespace pgwarden::metrics
