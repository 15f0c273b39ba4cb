// Process figures for the exposition, in the names and units the Prometheus client libraries use
// for process_* so dashboards built for those read the same way.
#include "metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace pgwarden::metrics {

namespace {

std::optional<std::string> readFile(const char* path) {
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Fields of /proc/self/stat after the command name, which may itself contain spaces and
// parentheses: everything after the last ')' (proc(5)). Field 3 (state) is index 0.
std::optional<std::vector<std::string>> statFields() {
  auto text = readFile("/proc/self/stat");
  if (!text) return std::nullopt;
  size_t close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text->substr(close + 1));
  std::vector<std::string> fields;
  std::string f;
  while (in >> f) fields.push_back(f);
  return fields;
}

}  // namespace

ProcessStats readProcessStats() {
  ProcessStats s;
  static const long page = sysconf(_SC_PAGESIZE);
  if (auto statm = readFile("/proc/self/statm")) {
    unsigned long long size = 0, resident = 0;
    if (std::sscanf(statm->c_str(), "%llu %llu", &size, &resident) == 2) {
      s.virtual_memory_bytes = static_cast<double>(size) * static_cast<double>(page);
      s.resident_memory_bytes = static_cast<double>(resident) * static_cast<double>(page);
    }
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    int own = dirfd(dir);
    double count = 0;
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      if (std::atoi(e->d_name) == own) continue;  // the descriptor this listing uses
      count += 1;
    }
    closedir(dir);
    s.open_fds = count;
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    s.max_fds = static_cast<double>(lim.rlim_cur);
  }
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    auto secs = [](const timeval& tv) {
      return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
    };
    s.cpu_seconds = secs(ru.ru_utime) + secs(ru.ru_stime);
  }
  return s;
}

std::optional<double> readProcessStartTime() {
  auto fields = statFields();
  // starttime is field 22 of stat(5): index 19 after the command name.
  if (!fields || fields->size() < 20) return std::nullopt;
  auto stat = readFile("/proc/stat");
  if (!stat) return std::nullopt;
  size_t pos = stat->find("\nbtime ");
  if (pos == std::string::npos) return std::nullopt;
  double btime = std::strtod(stat->c_str() + pos + 7, nullptr);
  double ticks = std::strtod((*fields)[19].c_str(), nullptr);
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0 || btime <= 0) return std::nullopt;
  return btime + ticks / static_cast<double>(hz);
}

void registerProcessMetrics(Registry& registry, const BuildInfo& build) {
  using Field = std::optional<double> ProcessStats::*;
  // The standard process_* names (what the Prometheus client libraries export, so stock
  // dashboards and alerts read them), and the pgwarden_process_* names dashboards of earlier
  // versions use.
  for (const char* family_prefix : {"process_", "pgwarden_process_"}) {
    const std::string prefix = family_prefix;
    auto add = [&](const char* name, const char* help, MetricType type, Field field) {
      registry.callbackFamily(prefix + name, help, type, {}, [field](SampleSink& sink) {
        ProcessStats s = readProcessStats();
        if (s.*field) sink.add({}, *(s.*field));
      });
    };
    add("resident_memory_bytes", "Resident memory size in bytes.", MetricType::kGauge,
        &ProcessStats::resident_memory_bytes);
    add("virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::kGauge,
        &ProcessStats::virtual_memory_bytes);
    add("open_fds", "Open file descriptors.", MetricType::kGauge, &ProcessStats::open_fds);
    add("max_fds", "Limit on open file descriptors (RLIMIT_NOFILE).", MetricType::kGauge,
        &ProcessStats::max_fds);
    add("cpu_seconds_total", "User and system CPU time spent, in seconds.", MetricType::kCounter,
        &ProcessStats::cpu_seconds);
  }

  double start = 0;
  if (auto t = readProcessStartTime()) {
    start = *t;
  } else {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    start = static_cast<double>(now.tv_sec);
  }
  for (const char* name : {"process_start_time_seconds", "pgwarden_process_start_time_seconds"}) {
    registry.callbackFamily(name, "Start time of the process since the Unix epoch, in seconds.",
                            MetricType::kGauge, {},
                            [start](SampleSink& sink) { sink.add({}, start); });
  }
  registry
      .gaugeFamily("pgwarden_build_info", "Always 1; the labels carry the version and git sha.",
                   {"version", "git_sha"}, 1)
      .with({build.version, build.git_sha})
      .set(1);
}

}  // namespace pgwarden::metrics
