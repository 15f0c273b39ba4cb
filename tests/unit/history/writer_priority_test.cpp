// history/writer_priority: the writer's thread between the background (SCHED_BATCH, nice 19) and
// the normal policy at its own nice value, read back from the kernel; the marks; and the probe
// refusing for a process whose RLIMIT_NICE does not let a thread come back (in a child, without
// root's CAP_SYS_NICE).
#include "history/writer_priority.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace pgwarden::history {
namespace {

// A thread's policy and nice value, as the kernel has them.
struct Policy {
  int policy;
  int nice;
  bool operator==(const Policy&) const = default;
};
std::ostream& operator<<(std::ostream& out, const Policy& p) {
  return out << "policy " << p.policy << " nice " << p.nice;
}
Policy policyOf(pid_t tid) {
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  EXPECT_EQ(errno, 0);
  return {sched_getscheduler(tid), nice};
}
const Policy kBackground{SCHED_BATCH, kBackgroundNice};

// A thread that runs what it is given, one job at a time, until destroyed.
class Thread {
 public:
  Thread() : thread_([this] { run(); }) {}
  ~Thread() {
    call([this] { done_ = true; });
    thread_.join();
  }
  pid_t tid() {
    pid_t id = 0;
    call([&] { id = gettid(); });
    return id;
  }
  void call(std::function<void()> job) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = std::move(job);
    cv_.notify_all();
    cv_.wait(lock, [&] { return !job_; });
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      cv_.wait(lock, [&] { return static_cast<bool>(job_); });
      job_();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool done_ = false;
  std::thread thread_;
};

TEST(PriorityMarks, AnEighthOfTheQueueOrTheSpoolAndAQuarterOfThatToComeBack) {
  const PriorityMarks m = priorityMarks(65536, 64ull << 20);
  EXPECT_EQ(m.promote_records, 8192u);
  EXPECT_EQ(m.promote_bytes, 8ull << 20);
  EXPECT_EQ(m.demote_records, 2048u);
  EXPECT_EQ(m.demote_bytes, 2ull << 20);
  const PriorityMarks small = priorityMarks(100, 4 << 20);
  EXPECT_EQ(small.promote_records, 12u);
  EXPECT_EQ(small.demote_records, 3u);
  EXPECT_EQ(priorityMarks(1, 1).promote_records, 1u);
}

TEST(WriterPriority, PromotedAtAMarkAndBackInTheBackgroundOnlyUnderBoth) {
  std::string why;
  if (!test::threadsMayComeBackFromNice19()) {
    // The probe must agree, and then the recorder never calls enter().
    EXPECT_FALSE(canLeaveBackground(&why));
    EXPECT_NE(why.find("cannot come back from nice 19"), std::string::npos) << why;
    return;
  }
  ASSERT_TRUE(canLeaveBackground(&why)) << why;
  WriterPriority p(PriorityMarks{100, 1000, 10, 100});
  Thread writer;
  const pid_t tid = writer.tid();
  // The writer's own nice value is what it comes back to.
  ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 3), 0);
  const Policy normal{SCHED_OTHER, 3};
  bool entered = false;
  writer.call([&] { entered = p.enter(&why); });
  ASSERT_TRUE(entered) << why;
  EXPECT_EQ(policyOf(tid), kBackground);
  EXPECT_TRUE(p.background());

  p.afterPush(99, 999);  // under both marks
  EXPECT_EQ(policyOf(tid), kBackground);
  p.afterPush(5, 1000);  // the bytes' mark
  EXPECT_EQ(policyOf(tid), normal);
  EXPECT_FALSE(p.background());
  EXPECT_EQ(p.promotions(), 1u);
  p.afterPush(500, 5000);  // already promoted: no second promotion
  EXPECT_EQ(p.promotions(), 1u);

  writer.call([&] { p.beforeWait(11, 0); });  // records above the low mark
  EXPECT_EQ(policyOf(tid), normal);
  writer.call([&] { p.beforeWait(0, 101); });  // bytes above it
  EXPECT_EQ(policyOf(tid), normal);
  writer.call([&] { p.beforeWait(10, 100); });
  EXPECT_EQ(policyOf(tid), kBackground);
  EXPECT_TRUE(p.background());

  p.afterPush(100, 0);  // the records' mark
  EXPECT_EQ(policyOf(tid), normal);
  EXPECT_EQ(p.promotions(), 2u);
  writer.call([&] { p.beforeWait(0, 0); });
  EXPECT_EQ(policyOf(tid), kBackground);

  p.finish();
  EXPECT_EQ(policyOf(tid), normal);
  EXPECT_FALSE(p.background());
  writer.call([&] { p.beforeWait(0, 0); });  // finished: stays
  EXPECT_EQ(policyOf(tid), normal);
  writer.call([&] { entered = p.enter(&why); });
  EXPECT_FALSE(entered);
  EXPECT_EQ(policyOf(tid), normal);
}

TEST(WriterPriority, FinishedBeforeTheWriterEntersKeepsItNormal) {
  WriterPriority p(priorityMarks(64, 1 << 20));
  p.finish();
  Thread writer;
  bool entered = true;
  std::string why;
  writer.call([&] { entered = p.enter(&why); });
  EXPECT_FALSE(entered);
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(policyOf(writer.tid()), (Policy{SCHED_OTHER, 0}));
}

// In a child that is not root (a root test run drops to nobody, and so loses CAP_SYS_NICE):
// RLIMIT_NICE 0 lets a thread go to nice 19 but not come back, so the probe refuses and says
// why. (The other way, RLIMIT_NICE 20 as systemd's LimitNICE=+0 sets it, needs CAP_SYS_RESOURCE
// to raise the hard limit, which a container's root may lack; root's own return is the test
// above.)
int probeInChild(rlim_t nice_limit, std::string* why) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const rlimit limit{nice_limit, nice_limit};
    int code = setrlimit(RLIMIT_NICE, &limit) == 0 ? 0 : 3;
    if (code == 0 && geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) code = 4;
    std::string reason;
    if (code == 0) code = canLeaveBackground(&reason) ? 0 : 1;
    (void)!write(fds[1], reason.data(), reason.size());
    _exit(code);
  }
  close(fds[1]);
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) why->append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(WriterPriority, TheProbeRefusesWhenAThreadCouldNotComeBack) {
  std::string why;
  EXPECT_EQ(probeInChild(0, &why), 1);
  EXPECT_NE(why.find("cannot come back from nice 19"), std::string::npos) << why;
}

}  // namespace
}  // namespace pgwarden::history
