// Process figures read from /proc/self: they must move when the process does.
#include "metrics/process_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace pgwarden::metrics {
namespace {

TEST(ProcessMetrics, OpenFdsFollowsOpenAndClose) {
  double before = readProcessStats().open_fds.value();
  std::vector<int> fds;
  for (int i = 0; i < 5; ++i) fds.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(readProcessStats().open_fds.value(), before + 5);
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(readProcessStats().open_fds.value(), before);
}

TEST(ProcessMetrics, ResidentMemoryGrowsWhenPagesAreTouched) {
  double before = readProcessStats().resident_memory_bytes.value();
  EXPECT_GT(before, 1024 * 1024);
  constexpr size_t kBytes = 64 * 1024 * 1024;
  std::vector<char> block(kBytes, 1);  // written, so resident
  double after = readProcessStats().resident_memory_bytes.value();
  EXPECT_GT(after, before + kBytes / 2);
  EXPECT_GE(readProcessStats().virtual_memory_bytes.value(), after);
  EXPECT_EQ(block[kBytes - 1], 1);
}

double processCpuClock() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

TEST(ProcessMetrics, CpuSecondsAdvanceWithWork) {
  // Spin until the kernel's own process CPU clock has moved 100 ms (however busy the machine
  // is), then the exported figure must have moved with it.
  double before = readProcessStats().cpu_seconds.value();
  double clock_start = processCpuClock();
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  volatile uint64_t spin = 0;
  while (processCpuClock() - clock_start < 0.1 && std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < 10000; ++i) spin = spin + 1;
  }
  double after = readProcessStats().cpu_seconds.value();
  EXPECT_GT(after - before, 0.05);
}

TEST(ProcessMetrics, StartTimeIsInThePastAndRecent) {
  auto start = readProcessStartTime();
  ASSERT_TRUE(start.has_value());
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(*start, now + 1);
  EXPECT_GT(*start, now - 3600);  // this test binary started within the hour
}

TEST(ProcessMetrics, MaxFdsIsTheSoftLimit) {
  auto max = readProcessStats().max_fds;
  ASSERT_TRUE(max.has_value());
  EXPECT_GE(*max, readProcessStats().open_fds.value());
}

TEST(ProcessMetrics, RegisteredFamiliesRenderNumbers) {
  Registry r;
  registerProcessMetrics(r, BuildInfo{"9.9.9", "cafe"});
  std::string text = r.render();
  for (const char* name :
       {"\npgwarden_process_resident_memory_bytes ", "\npgwarden_process_virtual_memory_bytes ",
        "\npgwarden_process_open_fds ", "\npgwarden_process_max_fds ",
        "\npgwarden_process_cpu_seconds_total ", "\npgwarden_process_start_time_seconds ",
        // The standard names stock dashboards and alerts read.
        "\nprocess_resident_memory_bytes ", "\nprocess_virtual_memory_bytes ",
        "\nprocess_open_fds ", "\nprocess_max_fds ", "\nprocess_cpu_seconds_total ",
        "\nprocess_start_time_seconds "}) {
    size_t at = text.find(name);
    ASSERT_NE(at, std::string::npos) << name << "\n" << text;
    std::string value = text.substr(at + std::string(name).size(),
                                    text.find('\n', at + 1) - at - std::string(name).size());
    EXPECT_GT(std::stod(value), 0) << name;
  }
  EXPECT_NE(text.find("pgwarden_build_info{git_sha=\"cafe\",version=\"9.9.9\"} 1\n"),
            std::string::npos);
}

}  // namespace
}  // namespace pgwarden::metrics
