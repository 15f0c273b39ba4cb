// The systemd integration spoken to as systemd would: a real datagram socket stands in for
// $NOTIFY_SOCKET, real listening sockets are passed as descriptors 3 and up, and the stderr sink
// writes to a real file whose device and inode play the journal's stream.
#include "daemon/systemd_notify.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/sink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::daemon {
namespace {

uint64_t monotonicUsec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

// std::regex is avoided here: GCC 12 warns inside it under -fsanitize, and the sanitizer build
// treats warnings as errors. `shape` is a template where 'd' stands for any digit.
bool matchesShape(std::string_view text, std::string_view shape) {
  if (text.size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(text[i]))
                        : text[i] != shape[i]) {
      return false;
    }
  }
  return true;
}

bool allDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

void clearSystemdEnv() {
  for (const char* name : {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
                           "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM"}) {
    unsetenv(name);
  }
}

// The service manager's end of the protocol: a bound SOCK_DGRAM Unix socket.
class NotifyListener {
 public:
  // `abstractName` binds in the abstract namespace ("@name" in NOTIFY_SOCKET) instead of a path.
  explicit NotifyListener(bool abstractName = false) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socklen_t len = 0;
    if (abstractName) {
      name_ = "@pgwarden-notify-test-" + std::to_string(getpid());
      std::memcpy(addr.sun_path + 1, name_.data() + 1, name_.size() - 1);
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_.size());
    } else {
      char tmpl[] = "/tmp/pgwarden-notify-XXXXXX";
      dir_ = mkdtemp(tmpl);
      name_ = dir_ + "/notify";
      std::strncpy(addr.sun_path, name_.c_str(), sizeof addr.sun_path - 1);
      len = sizeof addr;
    }
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;
  }
  ~NotifyListener() {
    close(fd_);
    if (!dir_.empty()) {
      unlink(name_.c_str());
      rmdir(dir_.c_str());
    }
  }
  bool bound() const { return bound_; }
  const std::string& address() const { return name_; }

  // The next datagram, or nothing after `timeoutMs`.
  std::optional<std::string> next(int timeoutMs = 2000) {
    timeval tv{timeoutMs / 1000, (timeoutMs % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
  std::string dir_;
  std::string name_;
};

class SystemdNotifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clearSystemdEnv();
    ASSERT_TRUE(listener_.bound()) << std::strerror(errno);
    setenv("NOTIFY_SOCKET", listener_.address().c_str(), 1);
  }
  void TearDown() override { clearSystemdEnv(); }

  NotifyListener listener_;
};

TEST_F(SystemdNotifyTest, LifecycleMessagesArriveInOrder) {
  SystemdNotifier notifier;
  ASSERT_TRUE(notifier.enabled());

  ASSERT_TRUE(notifier.ready().ok());
  const uint64_t before = monotonicUsec();
  ASSERT_TRUE(notifier.reloading().ok());
  const uint64_t after = monotonicUsec();
  ASSERT_TRUE(notifier.ready().ok());
  ASSERT_TRUE(notifier.stopping().ok());

  EXPECT_EQ(listener_.next(), "READY=1");
  auto reload = listener_.next();
  ASSERT_TRUE(reload.has_value());
  const std::string prefix = "RELOADING=1\nMONOTONIC_USEC=";
  ASSERT_EQ(reload->rfind(prefix, 0), 0u) << *reload;
  const std::string digits = reload->substr(prefix.size());
  ASSERT_TRUE(allDigits(digits)) << *reload;
  const uint64_t stamp = std::stoull(digits);
  EXPECT_GE(stamp, before);
  EXPECT_LE(stamp, after);
  EXPECT_EQ(listener_.next(), "READY=1");
  EXPECT_EQ(listener_.next(), "STOPPING=1");
  EXPECT_EQ(listener_.next(100), std::nullopt);
}

TEST_F(SystemdNotifyTest, ReadyCanCarryStatus) {
  SystemdNotifier notifier;
  ASSERT_TRUE(notifier.ready("listening on 127.0.0.1:6432").ok());
  EXPECT_EQ(listener_.next(), "READY=1\nSTATUS=listening on 127.0.0.1:6432");
}

TEST_F(SystemdNotifyTest, StatusCannotInjectAnotherAssignment) {
  SystemdNotifier notifier;
  ASSERT_TRUE(notifier.status("12 clients\nREADY=1\r\nSTOPPING=1").ok());
  EXPECT_EQ(listener_.next(), "STATUS=12 clients READY=1  STOPPING=1");
}

TEST_F(SystemdNotifyTest, AbstractSocketAddressWorks) {
  NotifyListener abstractListener(/*abstractName=*/true);
  ASSERT_TRUE(abstractListener.bound()) << std::strerror(errno);
  setenv("NOTIFY_SOCKET", abstractListener.address().c_str(), 1);
  SystemdNotifier notifier;
  ASSERT_TRUE(notifier.ready().ok());
  EXPECT_EQ(abstractListener.next(), "READY=1");
}

TEST_F(SystemdNotifyTest, NothingIsSentWhenNotifySocketWasUnsetAtStartUp) {
  unsetenv("NOTIFY_SOCKET");
  SystemdNotifier notifier;
  EXPECT_FALSE(notifier.enabled());
  // Set afterwards: the notifier decided at construction, as the daemon does at start-up.
  setenv("NOTIFY_SOCKET", listener_.address().c_str(), 1);
  EXPECT_TRUE(notifier.ready("x").ok());
  EXPECT_TRUE(notifier.reloading().ok());
  EXPECT_TRUE(notifier.status("x").ok());
  EXPECT_TRUE(notifier.watchdogPing().ok());
  EXPECT_TRUE(notifier.stopping().ok());
  EXPECT_EQ(listener_.next(200), std::nullopt);
}

TEST_F(SystemdNotifyTest, SendFailureIsReturnedNotThrown) {
  setenv("NOTIFY_SOCKET", "/nonexistent-pgwarden-dir/notify", 1);
  SystemdNotifier notifier;
  Status s = notifier.ready();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error().find("sd_notify failed"), std::string::npos) << s.error();
}

TEST_F(SystemdNotifyTest, WatchdogIntervalAndPing) {
  setenv("WATCHDOG_USEC", "3000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  SystemdNotifier notifier;
  EXPECT_EQ(notifier.watchdogInterval(), std::chrono::seconds(3));
  EXPECT_EQ(notifier.watchdogPingPeriod(), std::chrono::milliseconds(1500));
  ASSERT_TRUE(notifier.watchdogPing().ok());
  EXPECT_EQ(listener_.next(), "WATCHDOG=1");
}

TEST_F(SystemdNotifyTest, WatchdogMeantForAnotherProcessIsOff) {
  setenv("WATCHDOG_USEC", "3000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid() + 1).c_str(), 1);
  SystemdNotifier notifier;
  EXPECT_EQ(notifier.watchdogInterval().count(), 0);
  EXPECT_EQ(notifier.watchdogPingPeriod().count(), 0);
  ASSERT_TRUE(notifier.watchdogPing().ok());
  EXPECT_EQ(listener_.next(200), std::nullopt);
}

TEST_F(SystemdNotifyTest, WatchdogOffWithoutWatchdogUsec) {
  SystemdNotifier notifier;
  EXPECT_EQ(notifier.watchdogInterval().count(), 0);
  ASSERT_TRUE(notifier.watchdogPing().ok());
  EXPECT_EQ(listener_.next(200), std::nullopt);
}

// Socket activation tests place descriptors at 3 and 4, which belong to whoever runs the test
// binary; a forked child does it so the test process's own descriptors stay as they were. The
// child's exit code names the first check that failed.
int runInChild(int (*body)()) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

int listenFdsChild() {
  int tcp = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(tcp, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0 || listen(tcp, 8) != 0) return 2;
  int unixFd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::string path = "/tmp/pgwarden-listen-" + std::to_string(getpid());
  std::strncpy(un.sun_path, path.c_str(), sizeof un.sun_path - 1);
  if (bind(unixFd, reinterpret_cast<sockaddr*>(&un), sizeof un) != 0 || listen(unixFd, 8) != 0) {
    return 3;
  }
  unlink(path.c_str());
  // The kernel's port is read before the descriptors move: dup2 onto 4 may close `tcp` itself.
  socklen_t inLen = sizeof in;
  if (getsockname(tcp, reinterpret_cast<sockaddr*>(&in), &inLen) != 0) return 13;
  if (dup2(tcp, 3) != 3 || dup2(unixFd, 4) != 4) return 4;
  setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
  setenv("LISTEN_FDS", "2", 1);
  setenv("LISTEN_FDNAMES", "tcp:unix", 1);
  auto fds = listenFds();
  if (!fds.ok()) return 5;
  if (fds->size() != 2) return 6;
  if ((*fds)[0].fd != 3 || (*fds)[0].name != "tcp" || (*fds)[0].family != AF_INET) return 7;
  if ((*fds)[1].fd != 4 || (*fds)[1].name != "unix" || (*fds)[1].family != AF_UNIX) return 8;
  if ((*fds)[0].localAddress != "127.0.0.1:" + std::to_string(ntohs(in.sin_port))) return 11;
  if ((*fds)[1].localAddress != path) return 12;
  if (getenv("LISTEN_FDS") != nullptr || getenv("LISTEN_PID") != nullptr) return 9;
  if ((fcntl(3, F_GETFD) & FD_CLOEXEC) == 0 || (fcntl(4, F_GETFD) & FD_CLOEXEC) == 0) return 10;
  return 0;
}

TEST(SystemdListenFds, InheritedSocketsAreReturnedInOrderWithNamesAndFamilies) {
  EXPECT_EQ(runInChild(listenFdsChild), 0);
}

int nonSocketChild() {
  int p[2];
  if (pipe(p) != 0 || dup2(p[0], 3) != 3) return 2;
  setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
  setenv("LISTEN_FDS", "1", 1);
  auto fds = listenFds();
  if (fds.ok()) return 3;
  if (fds.error().find("descriptor 3") == std::string::npos) return 4;
  return 0;
}

TEST(SystemdListenFds, ADescriptorThatIsNotAListeningSocketIsRefused) {
  EXPECT_EQ(runInChild(nonSocketChild), 0);
}

TEST(SystemdListenFds, DescriptorsMeantForAnotherProcessAreIgnored) {
  clearSystemdEnv();
  setenv("LISTEN_PID", std::to_string(getpid() + 1).c_str(), 1);
  setenv("LISTEN_FDS", "2", 1);
  auto fds = listenFds();
  ASSERT_TRUE(fds.ok()) << fds.error();
  EXPECT_TRUE(fds->empty());
  clearSystemdEnv();
  auto none = listenFds();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

InheritedSocket inherited(int fd, const std::string& name, int family, const std::string& addr) {
  InheritedSocket s;
  s.fd = fd;
  s.name = name;
  s.family = family;
  s.localAddress = addr;
  return s;
}

TEST(SystemdListenerPlan, InheritedSocketsReplaceBindingTheirAddresses) {
  const std::vector<std::string> configured = {"127.0.0.1:6432", "[::1]:6432",
                                               "/run/pgwarden/.s.PGSQL.6432"};
  auto plan = planListeners({inherited(3, "pgwarden", AF_INET, "127.0.0.1:6432"),
                             inherited(4, "pgwarden", AF_UNIX, "/run/pgwarden/.s.PGSQL.6432")},
                            configured);
  ASSERT_TRUE(plan.ok()) << plan.error();
  ASSERT_EQ(plan->adopt.size(), 2u);
  EXPECT_EQ(plan->adopt[0].socket.fd, 3);
  EXPECT_TRUE(plan->adopt[0].configured);
  EXPECT_EQ(plan->adopt[1].socket.fd, 4);
  EXPECT_TRUE(plan->adopt[1].configured);
  // [::1]:6432 was not passed: pgwarden binds it itself.
  EXPECT_EQ(plan->bind, (std::vector<bool>{false, true, false}));
}

TEST(SystemdListenerPlan, WithoutInheritedSocketsEverythingIsBound) {
  auto plan = planListeners({}, {"127.0.0.1:6432", "/tmp/.s.PGSQL.6432"});
  ASSERT_TRUE(plan.ok()) << plan.error();
  EXPECT_TRUE(plan->adopt.empty());
  EXPECT_EQ(plan->bind, (std::vector<bool>{true, true}));
}

TEST(SystemdListenerPlan, AnInheritedSocketTheConfigDoesNotNameIsStillServed) {
  auto plan = planListeners({inherited(3, "extra", AF_INET6, "[::]:7000")}, {"127.0.0.1:6432"});
  ASSERT_TRUE(plan.ok()) << plan.error();
  ASSERT_EQ(plan->adopt.size(), 1u);
  EXPECT_FALSE(plan->adopt[0].configured);
  EXPECT_EQ(plan->bind, (std::vector<bool>{true}));
}

TEST(SystemdListenerPlan, TheMetricsAddressIsRefusedByName) {
  auto plan = planListeners({inherited(3, "metrics", AF_INET, "127.0.0.1:9930")},
                            {"127.0.0.1:6432"}, {"127.0.0.1:9930"});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().find("127.0.0.1:9930"), std::string::npos) << plan.error();
  EXPECT_NE(plan.error().find("metrics"), std::string::npos) << plan.error();
}

TEST(SystemdListenerPlan, OtherSocketFamiliesAreRefused) {
  auto plan = planListeners({inherited(3, "odd", AF_NETLINK, "")}, {"127.0.0.1:6432"});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().find("socket 3 (odd)"), std::string::npos) << plan.error();
}

TEST(SystemdListenerPlan, AddressTextIsCanonicalLikeGetsockname) {
  EXPECT_EQ(socketAddressText("127.0.0.1", 6432), "127.0.0.1:6432");
  EXPECT_EQ(socketAddressText("::0001", 6432), "[::1]:6432");
  EXPECT_EQ(socketAddressText("0:0:0:0:0:0:0:0", 5), "[::]:5");
  EXPECT_EQ(socketAddressText("localhost", 6432), "");
}

// A temporary file standing in for the stream journald hands a service as stderr.
class LogFile {
 public:
  LogFile() {
    char tmpl[] = "/tmp/pgwarden-log-XXXXXX";
    fd_ = mkstemp(tmpl);
    path_ = tmpl;
  }
  ~LogFile() {
    close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  std::string journalStream() const {
    struct stat st {};
    fstat(fd_, &st);
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  }
  std::string contents() const {
    std::string out;
    char buf[4096];
    ssize_t n;
    off_t off = 0;
    while ((n = pread(fd_, buf, sizeof buf, off)) > 0) {
      out.append(buf, static_cast<size_t>(n));
      off += n;
    }
    return out;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// Points fd 2 at `fd` for the lifetime of the object.
class StderrRedirect {
 public:
  explicit StderrRedirect(int fd) : saved_(dup(STDERR_FILENO)) { dup2(fd, STDERR_FILENO); }
  ~StderrRedirect() {
    dup2(saved_, STDERR_FILENO);
    close(saved_);
  }

 private:
  int saved_;
};

TEST(SystemdJournal, StderrIsJournalOnlyWhenDeviceAndInodeMatch) {
  clearSystemdEnv();
  LogFile file;
  StderrRedirect redirect(file.fd());
  EXPECT_FALSE(stderrIsJournal());
  setenv("JOURNAL_STREAM", file.journalStream().c_str(), 1);
  EXPECT_TRUE(stderrIsJournal());
  struct stat st {};
  fstat(file.fd(), &st);
  std::string other = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
  setenv("JOURNAL_STREAM", other.c_str(), 1);
  EXPECT_FALSE(stderrIsJournal());
  setenv("JOURNAL_STREAM", "not-a-stream", 1);
  EXPECT_FALSE(stderrIsJournal());
  clearSystemdEnv();
}

TEST(SystemdJournal, JournalLinesCarrySyslogPrioritiesAndNoTimestamp) {
  LogFile file;
  spdlog::logger logger("test", makeStderrSink(file.fd(), /*journal=*/true));
  logger.set_level(spdlog::level::trace);
  logger.trace("t");
  logger.debug("d");
  logger.info("i");
  logger.warn("w");
  logger.error("e");
  logger.critical("c");
  logger.error("first line\nsecond line");
  // One record, one line: a newline inside a message cannot start a record of its own.
  EXPECT_EQ(file.contents(), "<7>t\n<7>d\n<6>i\n<4>w\n<3>e\n<2>c\n<3>first line\\nsecond line\n");
}

TEST(SystemdJournal, ConsoleLinesAreTimestampedWithoutPriorityPrefix) {
  LogFile file;
  spdlog::logger logger("test", makeStderrSink(file.fd(), /*journal=*/false));
  logger.warn("upstream unreachable");
  const std::string out = file.contents();
  EXPECT_TRUE(matchesShape(out, "dddd-dd-dd dd:dd:dd.ddd [warning] upstream unreachable\n")) << out;
}

TEST(SystemdJournal, ConsoleSinkKeepsOneRecordOnOneLine) {
  // The last line of defence for a value a call site forgot to pass through logsafe().
  LogFile file;
  spdlog::logger logger("test", makeStderrSink(file.fd(), /*journal=*/false));
  const std::string forged =
      std::string("user=nobody\n2026-12-01 06:00:00.000 [error] FORGED") + '\0' + "\xff";
  logger.warn("{}", forged);
  const std::string out = file.contents();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(out.find('\0'), std::string::npos) << out;
  EXPECT_NE(out.find("user=nobody\\n2026-12-01 06:00:00.000 [error] FORGED\\x00\\xff\n"),
            std::string::npos)
      << out;
}

TEST(SystemdJournal, JsonFormatWritesOneObjectPerLineWithTheMessageEscaped) {
  LogFile file;
  spdlog::logger logger("test", makeStderrSink(file.fd(), /*journal=*/false, /*json=*/true));
  logger.warn("say \"hi\"\nnext");
  const std::string out = file.contents();
  // The newline is escaped by the sink first (one record, one line), then quoted for JSON.
  EXPECT_TRUE(matchesShape(out, R"({"time":"dddd-dd-ddTdd:dd:dd.dddZ","level":"warning",)"
                                R"("message":"say \"hi\"\\nnext"})"
                                "\n"))
      << out;
}

TEST(SystemdJournal, JsonLineEscapesControlCharacters) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000123));
  EXPECT_EQ(jsonLogLine(t, "info", std::string("a\x01" "b\tc")),
            "{\"time\":\"2023-11-14T22:13:20.123Z\",\"level\":\"info\",\"message\":"
            "\"a\\u0001b\\u0009c\"}");
}

TEST(SystemdJournal, DefaultSinkFollowsJournalStream) {
  clearSystemdEnv();
  LogFile file;
  {
    StderrRedirect redirect(file.fd());
    setenv("JOURNAL_STREAM", file.journalStream().c_str(), 1);
    spdlog::logger journal("j", makeStderrSink());
    journal.error("under journald");
    unsetenv("JOURNAL_STREAM");
    spdlog::logger console("c", makeStderrSink());
    console.error("on a terminal");
  }
  const std::string out = file.contents();
  EXPECT_EQ(out.rfind("<3>under journald\n", 0), 0u) << out;
  EXPECT_NE(out.find("[error] on a terminal\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("<3>on a terminal"), std::string::npos) << out;
}

}  // namespace
}  // namespace pgwarden::daemon
