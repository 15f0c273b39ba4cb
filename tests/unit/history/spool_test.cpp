// history: the memory-mapped spool on real files. Records come back as they went in, in order;
// what was not released is found again after the process "dies" (the Spool object is dropped
// without any goodbye, as a kill -9 leaves the file); a torn or damaged entry ends recovery; the
// ring wraps; bounds refuse rather than block; a second process cannot share the file.
#include "history/spool.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "history/spool_codec.h"
#include "test_util.h"

namespace pgwarden::history {
namespace {

using test::makeRecord;
using test::TempDir;

namespace layout = spool_layout;

std::unique_ptr<Spool> openSpool(const std::string& path, uint64_t capacity = 1 << 20,
                                 size_t max_records = 100000) {
  auto s = Spool::open(SpoolOptions{path, capacity, max_records});
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error());
  return s.ok() ? std::move(*s) : nullptr;
}

std::vector<Record> takeAll(Spool& s, size_t max = 1000000) {
  std::vector<Record> out;
  s.take(out, max);
  return out;
}

// Ring bytes one entry takes.
uint64_t entryBytes(const Record& r) { return (layout::kEntryHeader + encodedSize(r) + 7) & ~7ull; }

void pokeFile(const std::string& path, uint64_t offset, const void* bytes, size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, bytes, n, static_cast<off_t>(offset)), static_cast<ssize_t>(n));
  ::close(fd);
}

TEST(SpoolCodec, RoundTripsEveryFieldAndRefusesShortOrLongBodies) {
  Record r = makeRecord(7, "SELECT 'caf\xC3\xA9', '\xFF'");
  r.tables = {"public.orders", "", std::string("x\0y", 3)};
  r.guard_actions = R"([{"guard":"row_limit"}])";
  r.outcome = Outcome::kAborted;
  r.sqlstate = "57P01";
  r.error_message = std::string("nul\0inside", 10);
  r.sql_truncated = r.truncated = r.single_zero = true;
  r.rows_affected = -1;
  r.bytes_sent = int64_t{1} << 40;
  r.tool_name = "late_shipments";
  r.tool_args = R"({"to":"2024-10-01"})";
  r.request_id = R"("turn-7")";
  r.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  r.host = "10.0.0.2:5432";
  std::vector<uint8_t> body(encodedSize(r));
  encodeRecord(r, body.data());
  Record back;
  ASSERT_TRUE(decodeRecord(body.data(), body.size(), &back));
  EXPECT_EQ(back.sql_text, r.sql_text);
  EXPECT_EQ(back.tables, r.tables);
  EXPECT_EQ(back.error_message, r.error_message);
  EXPECT_EQ(back.outcome, Outcome::kAborted);
  EXPECT_TRUE(back.sql_truncated && back.truncated && back.single_zero);
  EXPECT_EQ(back.bytes_sent, r.bytes_sent);
  EXPECT_EQ(back.rows_affected, -1);
  EXPECT_EQ(back.started_at_us, r.started_at_us);
  EXPECT_EQ(back.conversation_id, r.conversation_id);
  EXPECT_EQ(back.tool_name, r.tool_name);
  EXPECT_EQ(back.tool_args, r.tool_args);
  EXPECT_EQ(back.request_id, r.request_id);
  EXPECT_EQ(back.traceparent, r.traceparent);
  EXPECT_EQ(back.host, r.host);
  for (size_t n = 0; n < body.size(); ++n) {
    Record cut;
    EXPECT_FALSE(decodeRecord(body.data(), n, &cut)) << n;
  }
  body.push_back(0);
  EXPECT_FALSE(decodeRecord(body.data(), body.size(), &back));
  // A record without tool fields is encoded as before they existed.
  Record plain = makeRecord(8, "SELECT 1");
  std::vector<uint8_t> old(encodedSize(plain));
  encodeRecord(plain, old.data());
  Record plain_back;
  ASSERT_TRUE(decodeRecord(old.data(), old.size(), &plain_back));
  EXPECT_TRUE(plain_back.tool_name.empty() && plain_back.tool_args.empty());
  EXPECT_TRUE(plain_back.request_id.empty() && plain_back.traceparent.empty());
  EXPECT_TRUE(plain_back.host.empty());
  // Request fields without tool fields.
  Record req = makeRecord(9, "SELECT 2");
  req.traceparent = r.traceparent;
  std::vector<uint8_t> req_body(encodedSize(req));
  encodeRecord(req, req_body.data());
  Record req_back;
  ASSERT_TRUE(decodeRecord(req_body.data(), req_body.size(), &req_back));
  EXPECT_EQ(req_back.traceparent, r.traceparent);
  EXPECT_TRUE(req_back.request_id.empty() && req_back.tool_name.empty());
}

// The loop hands the spool views (history::RecordView): a record seen as a view and written back
// into another record, whose every field held something else, encodes the same bytes, and the
// fields the spool does not carry come across too.
TEST(SpoolCodec, ARecordAndItsViewAreTheSameRecord) {
  Record r = makeRecord(7, "SELECT 'caf\xC3\xA9'");
  r.tables = {"public.orders", std::string("x\0y", 3)};
  r.guard_actions = R"([{"guard":"row_limit"}])";
  r.deny_code = "ROWS_CAPPED";
  r.sqlstate = "57P01";
  r.error_message = "gone";
  r.outcome = Outcome::kAborted;
  r.sql_truncated = r.truncated = r.single_zero = true;
  r.rows_returned = 3;
  r.rows_affected = -1;
  r.bytes_sent = int64_t{1} << 40;
  r.tool_name = "late_shipments";
  r.tool_args = R"({"to":"2024-10-01"})";
  r.request_id = "7";
  r.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  r.host = "primary";
  r.result_warnings = {"UNKNOWN_VALUE"};
  r.spool_epoch = 5;
  r.spool_seq = 9;
  Record other = makeRecord(99, "SELECT something else entirely, and longer");
  other.tables = {"a", "b", "c"};
  other.host = "10.0.0.2:5432";
  other.result_warnings = {"A", "B"};
  assignRecord(other, viewOf(r));
  std::vector<uint8_t> want(encodedSize(r));
  encodeRecord(r, want.data());
  const RecordView view = viewOf(other);
  ASSERT_EQ(encodedSize(view), want.size());
  std::vector<uint8_t> got(want.size());
  encodeRecord(view, got.data());
  EXPECT_EQ(got, want);
  EXPECT_EQ(other.result_warnings, r.result_warnings);
  EXPECT_EQ(other.spool_epoch, 5u);
  EXPECT_EQ(other.spool_seq, 9u);
  EXPECT_EQ(other.rows_returned, 3);
}

// A spool written before the host existed (schema 7) holds records encoded without it: they
// decode with no host, also into a record reused from one that had one (the writer's batch).
TEST(SpoolCodec, ARecordWithoutAHostIsEncodedAsBeforeAndDecodesWithNone) {
  Record v7 = makeRecord(11, "SELECT 3");
  v7.request_id = "7";
  v7.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  Record with_host = v7;
  with_host.host = "primary";
  EXPECT_EQ(encodedSize(with_host), encodedSize(v7) + 4 + 7);
  std::vector<uint8_t> old(encodedSize(v7));
  encodeRecord(v7, old.data());
  std::vector<uint8_t> now(encodedSize(with_host));
  encodeRecord(with_host, now.data());
  // Schema 7's layout: the same bytes up to its end, and only the flags byte tells them apart.
  const size_t flags_at = 7 * 8 + 1;
  EXPECT_EQ(now[flags_at], old[flags_at] | 32);
  now[flags_at] = old[flags_at];
  EXPECT_TRUE(std::equal(old.begin(), old.end(), now.begin()));
  Record back;
  encodeRecord(with_host, now.data());
  ASSERT_TRUE(decodeRecord(now.data(), now.size(), &back));
  EXPECT_EQ(back.host, "primary");
  ASSERT_TRUE(decodeRecord(old.data(), old.size(), &back));
  EXPECT_EQ(back.host, "");
  EXPECT_EQ(back.traceparent, v7.traceparent);
}

TEST(Spool, PushNamesTheRecordItTook) {
  TempDir dir;
  auto s = openSpool(dir.file("h.spool"));
  ASSERT_TRUE(s);
  Record first = makeRecord(1, "SELECT 1");
  Record second = makeRecord(2, "SELECT 2");
  ASSERT_TRUE(s->push(std::move(first)));
  ASSERT_TRUE(s->push(std::move(second)));
  // Copied, not moved from: the caller's record keeps its text and learns its record_uid.
  EXPECT_EQ(first.sql_text, "SELECT 1");
  EXPECT_EQ(first.spool_epoch, s->epoch());
  EXPECT_EQ(first.spool_seq, 1u);
  EXPECT_EQ(second.spool_seq, 2u);
  auto taken = takeAll(*s);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(recordUid(taken[1]), recordUid(second));
}

TEST(Spool, AViewIsEncodedWhereItLandsAndLearnsItsId) {
  TempDir dir;
  auto s = openSpool(dir.file("h.spool"));
  ASSERT_TRUE(s);
  const Record r = makeRecord(1, "SELECT 1");
  RecordView v = viewOf(r);
  ASSERT_TRUE(s->pushView(v));
  EXPECT_EQ(v.spool_epoch, s->epoch());
  EXPECT_EQ(v.spool_seq, 1u);
  EXPECT_EQ(r.spool_seq, 0u);  // the record the view shows is left as it was
  auto taken = takeAll(*s);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].sql_text, "SELECT 1");
  EXPECT_EQ(taken[0].user, r.user);
  EXPECT_EQ(recordUid(taken[0]), recordUid(v.spool_epoch, v.spool_seq));
}

TEST(Spool, TakesRecordsBackInOrderAndReleaseFreesTheirSpace) {
  TempDir dir;
  auto s = openSpool(dir.file("h.spool"));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->recovered(), 0u);
  EXPECT_NE(s->epoch(), 0u);
  for (uint64_t i = 1; i <= 10; ++i)
    ASSERT_TRUE(s->push(makeRecord(i, "SELECT " + std::to_string(i))));
  EXPECT_EQ(s->depth(), 10u);
  EXPECT_EQ(s->ready(), 10u);
  const uint64_t used = s->usedBytes();
  EXPECT_GT(used, 0u);

  std::vector<Record> first;
  EXPECT_EQ(s->take(first, 4), 4u);
  EXPECT_EQ(s->ready(), 6u);
  EXPECT_EQ(s->depth(), 10u);  // taken is not consumed
  auto rest = takeAll(*s);
  ASSERT_EQ(rest.size(), 6u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(first[i].sql_text, "SELECT " + std::to_string(i + 1));
    EXPECT_EQ(first[i].spool_seq, i + 1);
    EXPECT_EQ(first[i].spool_epoch, s->epoch());
  }
  EXPECT_EQ(rest[5].spool_seq, 10u);
  EXPECT_EQ(rest[5].session_id, 10u);

  s->release(4);
  EXPECT_EQ(s->depth(), 6u);
  EXPECT_LT(s->usedBytes(), used);
  s->release(6);
  EXPECT_EQ(s->depth(), 0u);
  EXPECT_EQ(s->usedBytes(), 0u);
}

TEST(Spool, WhatWasNotReleasedIsRecoveredAfterTheProcessDies) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  uint64_t epoch = 0;
  {
    auto s = openSpool(path);
    epoch = s->epoch();
    for (uint64_t i = 1; i <= 20; ++i) ASSERT_TRUE(s->push(makeRecord(i, "q" + std::to_string(i))));
    std::vector<Record> batch;
    s->take(batch, 12);
    s->release(8);  // 9..12 taken but not stored when the process dies; 13..20 never taken
  }
  auto s = openSpool(path);
  EXPECT_EQ(s->epoch(), epoch);
  EXPECT_EQ(s->recovered(), 12u);
  EXPECT_EQ(s->depth(), 12u);
  auto again = takeAll(*s);
  ASSERT_EQ(again.size(), 12u);
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].spool_seq, 9 + i);
    EXPECT_EQ(again[i].sql_text, "q" + std::to_string(9 + i));
  }
  // New records follow the recovered ones, and their ids never repeat an old one.
  ASSERT_TRUE(s->push(makeRecord(21, "q21")));
  auto next = takeAll(*s);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].spool_seq, 21u);
  s->release(13);
  s.reset();
  EXPECT_EQ(openSpool(path)->recovered(), 0u);
}

TEST(Spool, ARecordWithoutItsCommitWordEndsRecoveryAndItsSeqIsUsedAgain) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  std::vector<Record> sent;
  for (uint64_t i = 1; i <= 4; ++i) sent.push_back(makeRecord(i, "SELECT " + std::to_string(i)));
  {
    auto s = openSpool(path);
    for (auto r : sent) ASSERT_TRUE(s->push(std::move(r)));
  }
  // The crash came while the fourth was being written: its body is there, its commit word not.
  const uint64_t fourth =
      layout::kHeaderSize + entryBytes(sent[0]) + entryBytes(sent[1]) + entryBytes(sent[2]);
  const uint32_t zero = 0;
  pokeFile(path, fourth, &zero, sizeof zero);
  auto s = openSpool(path);
  EXPECT_EQ(s->recovered(), 3u);
  ASSERT_TRUE(s->push(makeRecord(5, "SELECT 5")));
  auto got = takeAll(*s);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[2].sql_text, "SELECT 3");
  EXPECT_EQ(got[3].sql_text, "SELECT 5");
  EXPECT_EQ(got[3].spool_seq, 4u);  // never handed out before: the torn one was never taken
}

TEST(Spool, ADamagedBodyFailsItsCrcAndEndsRecovery) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  std::vector<Record> sent;
  for (uint64_t i = 1; i <= 3; ++i) sent.push_back(makeRecord(i, "SELECT 'abcdef'"));
  {
    auto s = openSpool(path);
    for (auto r : sent) ASSERT_TRUE(s->push(std::move(r)));
  }
  const uint64_t second_body = layout::kHeaderSize + entryBytes(sent[0]) + layout::kEntryHeader;
  const char bad = 'X';
  pokeFile(path, second_body + 20, &bad, 1);
  EXPECT_EQ(openSpool(path)->recovered(), 1u);
}

TEST(Spool, ATornConsumedMarkFallsBackToTheOlderOne) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  {
    auto s = openSpool(path);
    for (uint64_t i = 1; i <= 6; ++i) ASSERT_TRUE(s->push(makeRecord(i, "SELECT 1")));
    takeAll(*s);
    s->release(2);  // mark generation 1 (second slot): consumed up to 2
    s->release(3);  // generation 2 (first slot): consumed up to 5
  }
  // The crash cut the newer mark short: recovery uses the older, and records 3..5 come again
  // (the store skips them by their ids).
  const char junk[4] = {1, 2, 3, 4};
  pokeFile(path, layout::kMarksOffset + 8, junk, sizeof junk);
  auto s = openSpool(path);
  EXPECT_EQ(s->recovered(), 4u);
  auto got = takeAll(*s);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].spool_seq, 3u);
}

TEST(Spool, TheRingWrapsAndRecoversRecordsOnBothSidesOfTheEnd) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  constexpr uint64_t kCapacity = 64 << 10;
  uint64_t next = 1;
  uint64_t expect = 1;
  uint64_t pushed_bytes = 0;
  {
    auto s = openSpool(path, kCapacity);
    // Many laps of the ring, each record checked as it comes back.
    for (int round = 0; round < 200; ++round) {
      for (int i = 0; i < 7; ++i, ++next) {
        Record r = makeRecord(next, std::string(100 + (next * 37) % 900, 'x'));
        pushed_bytes += entryBytes(r);
        ASSERT_TRUE(s->push(std::move(r)));
      }
      auto got = takeAll(*s);
      for (const auto& r : got) {
        ASSERT_EQ(r.spool_seq, expect);
        ASSERT_EQ(r.session_id, expect);
        ASSERT_EQ(r.sql_text.size(), 100 + (expect * 37) % 900);
        ++expect;
      }
      s->release(got.size());
    }
    EXPECT_GT(pushed_bytes, 10 * kCapacity);  // it did go round, many times
    // Fill until the ring is full: the records left straddle the end of the ring.
    while (s->push(makeRecord(next, std::string(700, 'y')))) ++next;
    EXPECT_GT(s->usedBytes(), kCapacity - 1024);
  }
  auto s = openSpool(path, kCapacity);
  EXPECT_EQ(s->recovered(), next - expect);
  auto got = takeAll(*s);
  ASSERT_EQ(got.size(), next - expect);
  for (const auto& r : got) {
    EXPECT_EQ(r.spool_seq, expect);
    EXPECT_EQ(r.session_id, expect);
    ++expect;
  }
}

// Once the kernel has written a page of the file back, the next store into the mapping faults.
// take() makes the stretch the producer writes next writable ahead of it, so that the producer
// (the event loop) takes no fault of its own there.
long minorFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

TEST(Spool, TheProducerTakesNoPageFaultInTheStretchTheConsumerPrepared) {
  TempDir dir;
  // A spool lives on a disk. Pages of tmpfs are never written back, so never write-protected: on
  // a machine whose temporary directory is one, the file goes next to the test instead.
  struct statfs fs {};
  const bool tmpfs = statfs(dir.file("").c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  const std::string path =
      tmpfs ? (std::filesystem::current_path() / "spool-fault-test.spool").string()
            : dir.file("s.spool");
  struct Remove {
    std::string path;
    ~Remove() { ::unlink(path.c_str()); }
  } remove{tmpfs ? path : std::string()};
  auto s = openSpool(path, 8 << 20);
  ASSERT_NE(s, nullptr);
  std::vector<Record> ahead;  // built first: only the pushes below are measured
  for (int i = 0; i < 200; ++i) {
    ahead.push_back(makeRecord(static_cast<uint64_t>(i), "SELECT '" + std::string(2000, 'x') + "'"));
  }
  auto lap = [&](bool prepared) -> long {
    EXPECT_TRUE(s->push(makeRecord(1, "SELECT 1")));
    // The kernel writes the file back: every page of the mapping is write-protected again.
    const int fd = ::open(path.c_str(), O_RDWR);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(fdatasync(fd), 0);
    ::close(fd);
    if (prepared) {
      EXPECT_EQ(takeAll(*s).size(), 1u);  // the consumer's turn
      s->release(1);
    }
    std::vector<Record> batch = ahead;
    const long before = minorFaults();
    for (auto& r : batch) EXPECT_TRUE(s->push(std::move(r)));
    const long faults = minorFaults() - before;
    const size_t n = batch.size() + (prepared ? 0 : 1);
    EXPECT_EQ(takeAll(*s).size(), n);
    s->release(n);
    return faults;
  };
  // 200 records of 2 KB cross about 100 pages. (An ASan build adds a fault per 32 KB written,
  // reading its shadow of pages it has not seen: about 13, in both laps.)
  const long unprepared = lap(false);
  const long prepared = lap(true);
  EXPECT_GE(unprepared, 50) << "the producer met no write-protected page: this test shows nothing";
  EXPECT_LE(prepared, unprepared / 4) << "the producer faulted in the stretch the consumer prepared";
}

TEST(Spool, FullRefusesUntilReleasedByBytesAndByRecords) {
  TempDir dir;
  auto s = openSpool(dir.file("bytes.spool"), 64 << 10);
  size_t accepted = 0;
  while (s->push(makeRecord(accepted, std::string(1000, 'z')))) ++accepted;
  EXPECT_GT(accepted, 40u);
  EXPECT_EQ(s->depth(), accepted);
  EXPECT_FALSE(s->push(makeRecord(0, std::string(1000, 'z'))));
  std::vector<Record> batch;
  s->take(batch, 10);
  s->release(10);
  EXPECT_TRUE(s->push(makeRecord(0, std::string(1000, 'z'))));
  // A record bigger than the whole ring never fits.
  EXPECT_FALSE(s->push(makeRecord(0, std::string(70 << 10, 'z'))));

  auto few = openSpool(dir.file("records.spool"), 1 << 20, 5);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(few->push(makeRecord(i, "SELECT 1")));
  EXPECT_FALSE(few->push(makeRecord(5, "SELECT 1")));
  std::vector<Record> one;
  few->take(one, 1);
  EXPECT_FALSE(few->push(makeRecord(5, "SELECT 1")));  // taken is still held
  few->release(1);
  EXPECT_TRUE(few->push(makeRecord(5, "SELECT 1")));
}

// The writer keeps its batch and the spool decodes into it: a reused record carries nothing of
// the one before it, and the record ids come out as they always did.
TEST(Spool, DecodingIntoAReusedRecordLeavesNothingOfTheLastOne) {
  Record with = makeRecord(1, "SELECT 'a long text that needs its own storage'");
  with.tool_name = "find_orders";
  with.tool_args = R"({"status":"late"})";
  with.tables = {"public.a", "public.b", "public.c"};
  with.result_warnings = {"UNKNOWN_VALUE"};
  const Record without = makeRecord(2, "SELECT 2");
  std::vector<uint8_t> a(encodedSize(with));
  std::vector<uint8_t> b(encodedSize(without));
  encodeRecord(with, a.data());
  encodeRecord(without, b.data());
  Record out;
  ASSERT_TRUE(decodeRecord(a.data(), a.size(), &out));
  EXPECT_EQ(out.tool_name, "find_orders");
  ASSERT_TRUE(decodeRecord(b.data(), b.size(), &out));
  EXPECT_EQ(out.sql_text, "SELECT 2");
  EXPECT_TRUE(out.tool_name.empty());
  EXPECT_TRUE(out.tool_args.empty());
  EXPECT_TRUE(out.result_warnings.empty());
  EXPECT_EQ(out.tables, without.tables);

  TempDir dir;
  auto s = openSpool(dir.file("reuse.spool"));
  ASSERT_TRUE(s->push(Record(with)));
  for (uint64_t i = 2; i <= 4; ++i) ASSERT_TRUE(s->push(makeRecord(i, "SELECT 2")));
  std::vector<Record> batch;
  EXPECT_EQ(s->take(batch, 2), 2u);
  s->release(2);
  EXPECT_EQ(s->take(batch, 10), 2u);  // into the same two records
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].spool_seq, 3u);
  EXPECT_TRUE(batch[0].tool_name.empty());
  EXPECT_EQ(batch[1].spool_seq, 4u);
  char buf[40];
  batch[1].spool_epoch = 0x2a;
  EXPECT_EQ(formatRecordUid(batch[1], buf, sizeof buf), "000000000000002a-4");
  EXPECT_EQ(recordUid(batch[1]), "000000000000002a-4");
}

TEST(Spool, ASecondProcessCannotOpenASpoolInUse) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  auto first = openSpool(path);
  // flock locks belong to the open file description: a second open() conflicts as another
  // process's would.
  auto second = Spool::open(SpoolOptions{path, 1 << 20, 100});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().find("in use"), std::string::npos) << second.error();
  first.reset();
  EXPECT_TRUE(Spool::open(SpoolOptions{path, 1 << 20, 100}).ok());
}

TEST(Spool, ANewSizeAppliesOnceTheSpoolIsEmpty) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  {
    auto s = openSpool(path, 1 << 20);
    ASSERT_TRUE(s->push(makeRecord(1, "SELECT 1")));
  }
  {
    auto s = openSpool(path, 2 << 20);
    EXPECT_EQ(s->capacity(), 1u << 20);  // still holds a record
    EXPECT_EQ(s->recovered(), 1u);
    takeAll(*s);
    s->release(1);
  }
  auto s = openSpool(path, 2 << 20);
  EXPECT_EQ(s->capacity(), 2u << 20);
  EXPECT_EQ(s->recovered(), 0u);
}

TEST(Spool, AFileThatIsNotASpoolIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  std::ofstream(path) << std::string(8192, 'n');
  auto s = Spool::open(SpoolOptions{path, 1 << 20, 100});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("not a pgwarden history spool"), std::string::npos) << s.error();
  EXPECT_EQ(std::filesystem::file_size(path), 8192u);
  EXPECT_FALSE(Spool::open(SpoolOptions{dir.file("no/such/dir.spool"), 1 << 20, 100}).ok());
}

// A spool as version 1 wrote it: the same entries checked with zlib's crc32, kind 1. `entries`
// are the ring offsets of the records the current code pushed.
void rewriteAsVersion1(const std::string& path, const std::vector<uint64_t>& entries) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.is_open());
  uint8_t header[40];
  f.read(reinterpret_cast<char*>(header), sizeof header);
  const uint32_t version = 1;
  std::memcpy(header + 8, &version, 4);
  uint64_t epoch = 0;
  std::memcpy(&epoch, header + 24, 8);
  const uint32_t header_crc = static_cast<uint32_t>(crc32(0, header, 32));
  std::memcpy(header + 32, &header_crc, 4);
  f.seekp(0);
  f.write(reinterpret_cast<const char*>(header), sizeof header);
  for (const uint64_t at : entries) {
    uint8_t e[layout::kEntryHeader];
    f.seekg(static_cast<std::streamoff>(layout::kHeaderSize + at));
    f.read(reinterpret_cast<char*>(e), sizeof e);
    uint32_t length = 0;
    std::memcpy(&length, e + 4, 4);
    std::string body(length, '\0');
    f.read(body.data(), length);
    const uint32_t kind = 1;
    std::memcpy(e + 20, &kind, 4);
    uLong c = crc32(0, reinterpret_cast<const Bytef*>(&epoch), 8);
    c = crc32(c, e + 8, 8);   // seq
    c = crc32(c, e + 4, 4);   // length
    c = crc32(c, e + 20, 4);  // kind
    c = crc32(c, reinterpret_cast<const Bytef*>(body.data()), length);
    const auto entry_crc = static_cast<uint32_t>(c);
    std::memcpy(e + 16, &entry_crc, 4);
    f.seekp(static_cast<std::streamoff>(layout::kHeaderSize + at));
    f.write(reinterpret_cast<const char*>(e), sizeof e);
  }
}

uint32_t fileVersion(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint32_t v = 0;
  f.seekg(8);
  f.read(reinterpret_cast<char*>(&v), 4);
  return v;
}

TEST(Spool, AVersion1SpoolIsRecoveredAndGoesOnInTheNewVersion) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  std::vector<uint64_t> offsets;
  {
    auto s = openSpool(path);
    uint64_t at = 0;
    for (int i = 0; i < 3; ++i) {
      Record r = makeRecord(i, "SELECT " + std::to_string(i));
      offsets.push_back(at);
      at += entryBytes(r);
      ASSERT_TRUE(s->push(std::move(r)));
    }
  }  // dies with three records unconsumed
  rewriteAsVersion1(path, offsets);
  ASSERT_EQ(fileVersion(path), 1u);
  {
    auto s = openSpool(path);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->recovered(), 3u);
    EXPECT_EQ(fileVersion(path), 2u);
    ASSERT_TRUE(s->push(makeRecord(3, "SELECT 3")));
  }  // dies again: three version 1 entries and one of version 2
  auto s = openSpool(path);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->recovered(), 4u);
  const auto got = takeAll(*s);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i].sql_text, "SELECT " + std::to_string(i));

  // A version 1 entry whose body was damaged fails zlib's CRC and ends recovery there.
  s.reset();
  const char junk = '#';
  pokeFile(path, layout::kHeaderSize + offsets[1] + layout::kEntryHeader + 2, &junk, 1);
  s = openSpool(path);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->recovered(), 1u);
}

TEST(Spool, ASpoolOfALaterVersionIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  {
    auto s = openSpool(path);
    ASSERT_TRUE(s->push(makeRecord(0, "SELECT 0")));
  }
  uint8_t header[36];
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(header), sizeof header);
  const uint32_t version = 3;
  std::memcpy(header + 8, &version, 4);
  const auto crc = static_cast<uint32_t>(crc32(0, header, 32));
  std::memcpy(header + 32, &crc, 4);
  pokeFile(path, 0, header, sizeof header);
  auto s = Spool::open(SpoolOptions{path, 1 << 20, 100});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("spool version 3"), std::string::npos) << s.error();
  EXPECT_EQ(fileVersion(path), 3u);
}

// Lowers this process's file size limit (RLIMIT_FSIZE) for one scope, with SIGXFSZ ignored so a
// write past it fails with EFBIG instead of ending the process: a file system that cannot hold
// the spool, without mounting one.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit l = old_;
    l.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

TEST(Spool, AStartThatCannotReserveTheSpoolLeavesNoFileBehind) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  {
    FileSizeLimit limit(1 << 20);
    auto s = Spool::open(SpoolOptions{path, 2 << 20, 100});
    ASSERT_FALSE(s.ok());
    EXPECT_FALSE(std::filesystem::exists(path)) << "the file this start made is removed";
  }
  // An empty spool found at start and grown past what fits: no file of the new size is left
  // (an empty one has no header; the next start sizes it afresh).
  openSpool(path, 512 << 10).reset();
  {
    FileSizeLimit limit(1 << 20);
    ASSERT_FALSE(Spool::open(SpoolOptions{path, 2 << 20, 100}).ok());
  }
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
  auto s = openSpool(path, 2 << 20);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->capacity(), 2u << 20);
}

TEST(Spool, TheSpaceCheckComparesTheSizeWithTheFreeSpace) {
  TempDir dir;
  const std::string path = dir.file("h.spool");
  EXPECT_TRUE(checkSpoolSpace(path, 1 << 20).ok());
  const auto huge = checkSpoolSpace(path, uint64_t{1} << 60);  // no file system here is that big
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(
      huge.error().find("cannot reserve " + std::to_string((uint64_t{1} << 60) + 4096) +
                        " bytes for the spool " + path + ": " + dir.path().string() + " has "),
      std::string::npos)
      << huge.error();
  // The blocks an existing spool holds count: its own size always fits.
  openSpool(path, 1 << 20).reset();
  EXPECT_TRUE(checkSpoolSpace(path, 1 << 20).ok());
  // A directory that does not exist yet is the start-up's to report.
  EXPECT_TRUE(checkSpoolSpace(dir.file("later/h.spool"), 1 << 20).ok());
}

}  // namespace
}  // namespace pgwarden::history
