// The daemon's side of systemd's service protocol: readiness, reload and stop notifications, the
// watchdog, sockets passed in by socket activation, and stderr logging that journald reads cleanly.
// Everything here is a no-op when pgwarden was not started by systemd (NOTIFY_SOCKET unset).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace spdlog::sinks {
class sink;
}  // namespace spdlog::sinks

namespace pgwarden::daemon {

// Talks to the service manager over $NOTIFY_SOCKET (sd_notify(3)). Construct one at start-up, in
// the main process, before any thread is started: the environment is read once, here. Every call
// is a single non-blocking datagram send, so it is safe on the event loop. A failed send is
// returned, never thrown: the daemon logs it and carries on.
class SystemdNotifier {
 public:
  SystemdNotifier();

  // True when a service manager is listening (NOTIFY_SOCKET is set). When false, every call
  // below returns ok without doing anything.
  bool enabled() const { return enabled_; }

  // READY=1: listeners are bound and the config is loaded. Also ends a reload (after reloading()).
  // `status` is optional text sent as STATUS= in the same datagram.
  [[nodiscard]] Status ready(std::string_view status = {});
  // RELOADING=1 with MONOTONIC_USEC=<now>, which systemd 253+ requires to match the reload to the
  // request; older versions ignore the extra field. Follow it with ready() once the new config is
  // in place, or was rejected and the old one kept: both end the reload.
  [[nodiscard]] Status reloading();
  // STOPPING=1: shutdown has begun (SIGTERM received); in-flight statements are finishing.
  [[nodiscard]] Status stopping();
  // STATUS=<text>, shown by `systemctl status`. Newlines are replaced by spaces so the text can
  // never smuggle another assignment (READY=1) into the datagram.
  [[nodiscard]] Status status(std::string_view text);

  // The watchdog interval systemd expects pings within (WatchdogSec=), or zero when the watchdog
  // is off or meant for another process (WATCHDOG_PID).
  std::chrono::microseconds watchdogInterval() const { return watchdogInterval_; }
  // How often to ping: half the interval, as sd_watchdog_enabled(3) advises; zero when off.
  // The daemon drives this from a libuv timer so a stuck loop stops the pings.
  std::chrono::milliseconds watchdogPingPeriod() const;
  // WATCHDOG=1.
  [[nodiscard]] Status watchdogPing();

 private:
  [[nodiscard]] Status send(const std::string& state);

  bool enabled_ = false;
  std::chrono::microseconds watchdogInterval_{0};
};

// One listening socket handed over by socket activation (pgwarden.socket).
struct InheritedSocket {
  int fd = -1;
  std::string name;  // FileDescriptorName= of the socket unit, "unknown" when unnamed
  int family = 0;    // AF_INET, AF_INET6 or AF_UNIX (from getsockname)
  // The bound address in the config's spelling, to match against `listen:`: "127.0.0.1:6432",
  // "[::1]:6432", or the socket's path ("/run/pgwarden/.s.PGSQL.6432").
  std::string localAddress;
};

// The listening sockets systemd passed in (sd_listen_fds(3)), in the socket unit's order. Empty
// when none were passed or they were meant for another process. Call once, at start-up: it
// clears LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES so child processes do not see them, and marks the
// descriptors close-on-exec. Fails if a passed descriptor is not a listening stream socket.
[[nodiscard]] Result<std::vector<InheritedSocket>> listenFds();

// How inherited sockets and the configured listen addresses meet. Inherited sockets replace
// binding, as in PgBouncer: every socket systemd passed is served (the socket unit is the
// operator's word on where to listen), and a configured address that no inherited socket covers
// is bound by pgwarden as usual, so a socket unit that lists only some addresses still works.
struct ListenerPlan {
  struct Adopted {
    InheritedSocket socket;
    bool configured = false;  // its address is one of `configured`; false: logged as extra
  };
  std::vector<Adopted> adopt;  // every inherited socket, in the socket unit's order
  std::vector<bool> bind;      // parallel to `configured`: true when pgwarden must bind it
};

// `configured` holds the config's listen addresses in InheritedSocket::localAddress spelling
// (socketAddressText() for TCP, the socket file's path for Unix). `refused` are addresses an
// inherited socket must not have (the metrics endpoint, which pgwarden always binds itself):
// passing one fails with a message that names it. Sockets of other families fail too.
[[nodiscard]] Result<ListenerPlan> planListeners(const std::vector<InheritedSocket>& inherited,
                                                 const std::vector<std::string>& configured,
                                                 const std::vector<std::string>& refused = {});

// "127.0.0.1:6432" or "[::1]:6432" for an IP literal and a port, in inet_ntop's canonical
// spelling (so "::0001" matches what getsockname reports); "" when `host` is not an IP literal.
std::string socketAddressText(const std::string& host, int port);

// True when fd 2 is the journal's stream: $JOURNAL_STREAM names the device and inode of the
// stream systemd connected, and they match fstat(2) (so a redirect by the operator is noticed).
bool stderrIsJournal();

// Log lines for stderr. Under journald: "<N>message" with the syslog priority of the level
// (sd-daemon.h SD_ERR etc.) and no timestamp, since the journal adds its own. Otherwise:
// "2024-05-01 12:00:00.123 [info] message". Either way one record is one line: control
// characters and invalid UTF-8 left in a message are escaped (common/log_text.h).
// Use the returned sink as the logger's only stderr sink and do not call set_pattern() on that
// logger: the sink already has the right pattern for where its output goes.
// `json` (logging.format: json): each record is one JSON object on its line instead,
// {"time":"2024-05-01T12:00:00.123Z","level":"info","message":"..."}, after the priority
// prefix under journald.
std::shared_ptr<spdlog::sinks::sink> makeStderrSink(bool json = false);
// The same, writing to `fd` and with the journal decision made by the caller (tests, tools).
std::shared_ptr<spdlog::sinks::sink> makeStderrSink(int fd, bool journal, bool json = false);
// One record as logging.format json writes it (without the newline).
std::string jsonLogLine(std::chrono::system_clock::time_point time, std::string_view level,
                        std::string_view message);

// The patterns the sinks above use (the priority prefix is added outside the pattern).
inline constexpr const char* kJournalLogPattern = "%v";
inline constexpr const char* kConsoleLogPattern = "%Y-%m-%d %H:%M:%S.%e [%l] %v";

}  // namespace pgwarden::daemon
