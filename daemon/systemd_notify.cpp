// sd_notify(3), sd_watchdog_enabled(3) and sd_listen_fds(3) behind small calls that never throw,
// and the stderr sink that writes syslog-priority prefixed lines when journald is reading them.
// See systemd_notify.h for the contract each call keeps.
#include "daemon/systemd_notify.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include "common/log_text.h"

namespace pgwarden::daemon {

namespace {

std::string errnoText(int err) { return std::strerror(err < 0 ? -err : err); }

std::string formatAddress(const sockaddr_storage& addr, socklen_t len) {
  char host[INET6_ADDRSTRLEN] = {};
  switch (addr.ss_family) {
    case AF_INET: {
      const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
      inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
      return std::string(host) + ":" + std::to_string(ntohs(in.sin_port));
    }
    case AF_INET6: {
      const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
      inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
      return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6.sin6_port));
    }
    case AF_UNIX: {
      const auto& un = reinterpret_cast<const sockaddr_un&>(addr);
      const size_t pathLen = len > offsetof(sockaddr_un, sun_path)
                                 ? static_cast<size_t>(len) - offsetof(sockaddr_un, sun_path)
                                 : 0;
      if (pathLen == 0) return "";
      if (un.sun_path[0] == '\0') return "@" + std::string(un.sun_path + 1, pathLen - 1);
      return std::string(un.sun_path, strnlen(un.sun_path, pathLen));
    }
    default:
      return "";
  }
}

}  // namespace

SystemdNotifier::SystemdNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is this process.
  if (sd_watchdog_enabled(0, &usec) > 0) {
    watchdogInterval_ = std::chrono::microseconds(usec);
  }
}

std::chrono::milliseconds SystemdNotifier::watchdogPingPeriod() const {
  if (watchdogInterval_.count() == 0) return std::chrono::milliseconds(0);
  // Half the interval, but never zero: a sub-millisecond WatchdogSec would otherwise turn the
  // timer off while systemd still expects pings.
  auto half = std::chrono::duration_cast<std::chrono::milliseconds>(watchdogInterval_ / 2);
  return half.count() > 0 ? half : std::chrono::milliseconds(1);
}

Status SystemdNotifier::ready(std::string_view status) {
  if (!enabled_) return {};
  std::string state = "READY=1";
  if (!status.empty()) {
    state += '\n';
    state += "STATUS=";
    for (char c : status) state += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return send(state);
}

Status SystemdNotifier::reloading() {
  if (!enabled_) return {};
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t usec =
      static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
  char state[64];
  std::snprintf(state, sizeof state, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, usec);
  return send(state);
}

Status SystemdNotifier::stopping() {
  if (!enabled_) return {};
  return send("STOPPING=1");
}

Status SystemdNotifier::status(std::string_view text) {
  if (!enabled_) return {};
  std::string state = "STATUS=";
  for (char c : text) state += (c == '\n' || c == '\r') ? ' ' : c;
  return send(state);
}

Status SystemdNotifier::watchdogPing() {
  if (!enabled_ || watchdogInterval_.count() == 0) return {};
  return send("WATCHDOG=1");
}

Status SystemdNotifier::send(const std::string& state) {
  // sd_notify returns > 0 when sent, 0 when NOTIFY_SOCKET vanished, < 0 (-errno) on failure.
  int r = sd_notify(0, state.c_str());
  if (r < 0) return Status::fail("sd_notify failed: " + errnoText(r));
  if (r == 0) return Status::fail("sd_notify: NOTIFY_SOCKET is no longer set");
  return {};
}

Result<std::vector<InheritedSocket>> listenFds() {
  char** names = nullptr;
  // unset_environment=1: the variables describe this process only; a child must not take them.
  int n = sd_listen_fds_with_names(1, &names);
  if (n < 0)
    return Result<std::vector<InheritedSocket>>::fail("sd_listen_fds failed: " + errnoText(n));
  std::vector<InheritedSocket> sockets;
  std::string error;
  for (int i = 0; i < n; ++i) {
    InheritedSocket s;
    s.fd = SD_LISTEN_FDS_START + i;
    s.name = (names != nullptr && names[i] != nullptr) ? names[i] : "unknown";
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (sd_is_socket(s.fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0 ||
        getsockname(s.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (error.empty()) {
        error = "inherited descriptor " + std::to_string(s.fd) + " (" + s.name +
                ") is not a listening stream socket";
      }
    } else {
      s.family = addr.ss_family;
      s.localAddress = formatAddress(addr, len);
    }
    sockets.push_back(std::move(s));
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) std::free(names[i]);
    std::free(names);
  }
  if (!error.empty()) return Result<std::vector<InheritedSocket>>::fail(error);
  return sockets;
}

Result<ListenerPlan> planListeners(const std::vector<InheritedSocket>& inherited,
                                  const std::vector<std::string>& configured,
                                  const std::vector<std::string>& refused) {
  ListenerPlan plan;
  plan.bind.assign(configured.size(), true);
  for (const auto& s : inherited) {
    if (s.family != AF_INET && s.family != AF_INET6 && s.family != AF_UNIX) {
      return Result<ListenerPlan>::fail("inherited socket " + std::to_string(s.fd) + " (" +
                                        s.name + ") is neither TCP nor a Unix socket");
    }
    for (const auto& r : refused) {
      if (!r.empty() && r == s.localAddress) {
        return Result<ListenerPlan>::fail(
            "inherited socket " + s.localAddress + " (" + s.name +
            ") is the metrics endpoint's address, which pgwarden binds itself: remove it from "
            "the socket unit");
      }
    }
    ListenerPlan::Adopted a{s, false};
    for (size_t i = 0; i < configured.size(); ++i) {
      if (configured[i] == s.localAddress) {
        a.configured = true;
        plan.bind[i] = false;
      }
    }
    plan.adopt.push_back(std::move(a));
  }
  return plan;
}

std::string socketAddressText(const std::string& host, int port) {
  char text[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    inet_ntop(AF_INET, &v4, text, sizeof text);
    return std::string(text) + ":" + std::to_string(port);
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    inet_ntop(AF_INET6, &v6, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(port);
  }
  return "";
}

bool stderrIsJournal() {
  const char* env = std::getenv("JOURNAL_STREAM");
  if (env == nullptr) return false;
  uintmax_t dev = 0;
  uintmax_t ino = 0;
  if (std::sscanf(env, "%ju:%ju", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<uintmax_t>(st.st_dev) == dev && static_cast<uintmax_t>(st.st_ino) == ino;
}

namespace {

// sd-daemon.h's SD_* prefixes, by spdlog level.
const char* priorityPrefix(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return SD_DEBUG;
    case spdlog::level::info:
      return SD_INFO;
    case spdlog::level::warn:
      return SD_WARNING;
    case spdlog::level::err:
      return SD_ERR;
    case spdlog::level::critical:
      return SD_CRIT;
    case spdlog::level::off:
    case spdlog::level::n_levels:
      return SD_INFO;
  }
  return SD_INFO;
}

// Writes whole lines to a file descriptor with write(2): stderr is unbuffered anyway, and one
// write per record keeps lines from different threads from interleaving on a pipe.
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  StderrSink(int fd, bool journal, bool json) : fd_(fd), journal_(journal), json_(json) {
    set_pattern_(journal ? kJournalLogPattern : kConsoleLogPattern);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    // One record is one line: whatever a call site let through unescaped (a newline, a NUL,
    // invalid UTF-8) is escaped here, so no text can start a line that looks like a record.
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    spdlog::details::log_msg safe = msg;
    std::string escaped;
    if (needsLogEscape(payload)) {
      escaped = escapeLogText(payload, 0, LogEscape::kControlsOnly);
      safe.payload = spdlog::string_view_t(escaped.data(), escaped.size());
    }
    spdlog::memory_buf_t formatted;
    if (json_) {
      const auto level = spdlog::level::to_string_view(msg.level);
      std::string line = jsonLogLine(msg.time, std::string_view(level.data(), level.size()),
                                     std::string_view(safe.payload.data(), safe.payload.size()));
      line += '\n';
      formatted.append(line.data(), line.data() + line.size());
    } else {
      formatter_->format(safe, formatted);
    }
    if (!journal_) {
      writeAll(formatted.data(), formatted.size());
      return;
    }
    // journald takes the priority from the line's own prefix.
    std::string out = priorityPrefix(msg.level);
    out.append(formatted.data(), formatted.size());
    writeAll(out.data(), out.size());
  }
  void flush_() override {}

 private:
  void writeAll(const char* data, size_t size) {
    while (size > 0) {
      ssize_t n = ::write(fd_, data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;  // nowhere left to report a logging failure
      }
      data += n;
      size -= static_cast<size_t>(n);
    }
  }

  int fd_;
  bool journal_;
  bool json_;
};

}  // namespace

std::string jsonLogLine(std::chrono::system_clock::time_point time, std::string_view level,
                        std::string_view message) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[96];  // ample for any int fields (GCC checks the worst case)
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count() % 1000));
  std::string out = "{\"time\":\"";
  out += stamp;
  out += "\",\"level\":\"";
  out += level;
  out += "\",\"message\":\"";
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += ch;
    }
  }
  out += "\"}";
  return out;
}

std::shared_ptr<spdlog::sinks::sink> makeStderrSink(int fd, bool journal, bool json) {
  return std::make_shared<StderrSink>(fd, journal, json);
}

std::shared_ptr<spdlog::sinks::sink> makeStderrSink(bool json) {
  return makeStderrSink(STDERR_FILENO, stderrIsJournal(), json);
}

}  // namespace pgwarden::daemon
