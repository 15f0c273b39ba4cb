// Shared pieces of the agent tests: a libuv loop run until a condition holds, the loopback policy
// service (webhook_server.py) started as a child process, groups built from YAML with every guard
// kind, and a throwaway PostgreSQL cluster made with initdb on a free port.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "analysis/analysis.h"
#include "guards/policy.h"
#include "budgets/guard_kinds.h"
#include "guards/webhook_guard.h"
#include "local_server.h"

namespace pgwarden::agent_test {

namespace fs = std::filesystem;

inline int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A statement analysed as the session would, with the request context a chain is run with.
struct Prepared {
  std::shared_ptr<const analysis::Analysis> analysis;
  std::string sql;
  guards::RequestContext ctx;
};

inline Prepared prepare(const std::string& sql) {
  Prepared r{analysis::analyzeUncached(sql), sql, {}};
  r.ctx.user = "agent";
  r.ctx.agent_id = "planner";
  r.ctx.conversation_id = "c-42";
  return r;
}

// Runs `loop` until `done()` or `timeout_ms`; returns done().
inline bool runUntil(uv_loop_t* loop, const std::function<bool()>& done, int64_t timeout_ms = 10000) {
  uv_timer_t wake;
  uv_timer_init(loop, &wake);
  uv_timer_start(&wake, [](uv_timer_t*) {}, 5, 5);
  const int64_t end = nowMs() + timeout_ms;
  while (!done() && nowMs() < end) uv_run(loop, UV_RUN_ONCE);
  uv_timer_stop(&wake);
  uv_close(reinterpret_cast<uv_handle_t*>(&wake), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
  return done();
}

// Lets every pending close callback run, then closes the loop.
inline void drainLoop(uv_loop_t* loop) {
  for (int i = 0; i < 100 && uv_loop_alive(loop); ++i) uv_run(loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(loop), 0) << "handles left open on the loop";
}

using ::pgwarden::test::freePort;

// webhook_server.py as a child; stopped (stdin closed, then killed) on destruction.
class PolicyService {
 public:
  PolicyService() {
    int in_pipe[2];
    int out_pipe[2];
    if (pipe(in_pipe) != 0 || pipe(out_pipe) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in_pipe[0], 0);
      dup2(out_pipe[1], 1);
      close(in_pipe[1]);
      close(out_pipe[0]);
      const std::string script = std::string(PGW_AGENT_TEST_DIR) + "/webhook_server.py";
      execl(PGW_PYTHON, PGW_PYTHON, script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    stdin_fd_ = in_pipe[1];
    FILE* f = fdopen(out_pipe[0], "r");
    char line[32] = {0};
    if (f && std::fgets(line, sizeof line, f)) port_ = std::atoi(line);
    if (f) std::fclose(f);
  }
  ~PolicyService() {
    if (stdin_fd_ >= 0) close(stdin_fd_);
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int port_ = 0;
};

inline guards::PolicyMap groups(const std::string& yaml) {
  return budgets::parseAgentPolicyGroups(YAML::Load(yaml));
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/pgw-agent-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path path_;
};

using ::pgwarden::test::findPgBin;

// A throwaway cluster owned by the `postgres` OS user when running as root, on 127.0.0.1.
class PostgresServer {
 public:
  bool init(const fs::path& bin) {
    bin_ = bin;
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("postgres");
      if (pw == nullptr) return false;
      if (::chown(dir_.path().c_str(), pw->pw_uid, pw->pw_gid) != 0) return false;
      as_user_ = "runuser -u postgres -- ";
    }
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                     fs::perms::others_read | fs::perms::others_exec);
    port_ = freePort();
    return run(bin_ / "initdb", "-D " + data() + " -U postgres -A trust -E UTF8 --locale=C --no-sync > " +
                                    log("initdb") + " 2>&1") &&
           run(bin_ / "pg_ctl", "-D " + data() + " -l " + log("server") + " -w -t 60 -o \"-p " +
                                    std::to_string(port_) + " -k " + dir_.path().string() +
                                    " -c listen_addresses=127.0.0.1 -c fsync=off\" start > " + log("pg_ctl") +
                                    " 2>&1");
  }
  ~PostgresServer() {
    if (!bin_.empty() && fs::exists(dir_.path() / "data" / "postmaster.pid")) {
      (void)run(bin_ / "pg_ctl", "-D " + data() + " -m immediate -w -t 60 stop > /dev/null 2>&1");
    }
  }
  std::string dsn() const { return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres"; }
  int port() const { return port_; }

 private:
  std::string data() const { return (dir_.path() / "data").string(); }
  std::string log(const char* name) const { return (dir_.path() / (std::string(name) + ".log")).string(); }
  bool run(const fs::path& exe, const std::string& args) {
    const std::string cmd = as_user_ + exe.string() + " " + args;
    return std::system(cmd.c_str()) == 0;
  }
  TempDir dir_;
  fs::path bin_;
  std::string as_user_;
  int port_ = 0;
};

}  // namespace pgwarden::agent_test
