// The history spool (history.durability: process): a file mapped into memory and used as a ring
// of serialized records between the event loop and the writer thread. Appending is a memcpy into
// the mapping, no system call; the writer decodes records, stores them, then marks them consumed
// in the file's header. Pages of a shared file mapping belong to the kernel's page cache, so what
// was appended survives the process being killed (not a power loss: nothing is synced), and the
// next start finds every record not yet marked consumed and hands it to the writer first.
//
// File layout (host byte order): a 4 KiB header {magic, version, capacity, epoch, two
// consumed marks}, then `capacity` bytes of ring. Each ring entry is a 24-byte header {commit,
// length, seq, crc, kind} and its body, padded to 8 bytes. The commit word, a function of seq, is
// stored last, after the body: an entry cut short by a crash has no commit word for its seq and
// ends recovery there. The CRC covers the file's random epoch, seq, length, kind and body:
// CRC-32C for records (kind 3; the CPU's crc32 instruction), zlib's crc32 for wrap entries, the
// header and its marks, and for records of a version 1 file (kind 1), which are still read. A
// record that does not fit before the ring's end leaves a wrap entry (or under 24 bytes of
// slack) and goes to offset 0. Sequence numbers run on across restarts; (epoch,
// seq) is the record's unique id in the store.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "common/result.h"
#include "history/record_queue.h"

namespace pgwarden::history {

// Where things are in the file (tests damage a spool on purpose with these).
namespace spool_layout {
inline constexpr uint64_t kHeaderSize = 4096;  // the ring starts here
// {commit u32, length u32, seq u64, crc u32, kind u32}
inline constexpr uint64_t kEntryHeader = 24;
// The two consumed marks, each {seq u64, offset u64, generation u64, crc u32, reserved u32}.
inline constexpr size_t kMarksOffset = 40;
inline constexpr size_t kMarkSize = 32;
}  // namespace spool_layout

struct SpoolOptions {
  std::string path;
  uint64_t capacity = 64ull << 20;  // ring bytes (history.spool_size); the file adds a 4 KiB header
  size_t max_records = 65536;       // history.queue_size
};

class Spool final : public RecordQueue {
 public:
  // Opens (creating it if missing) and recovers the spool at options.path, locked against a
  // second pgwarden. A spool that still holds records keeps its own capacity until it has been
  // emptied and reopened; an empty one takes options.capacity. Fails when the file cannot be
  // created, locked, sized or mapped, or is not a spool of this version.
  static Result<std::unique_ptr<Spool>> open(const SpoolOptions& options);
  ~Spool() override;
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // RecordQueue. push() is the producer's; take(), release() and abandon() the consumer's.
  // push() copies `r` and, when it took it, sets r.spool_epoch and r.spool_seq (its record_uid).
  bool push(Record&& r) override;
  bool pushView(RecordView& v) override;
  size_t take(std::vector<Record>& out, size_t max) override;
  void release(size_t n) override;
  size_t abandon() override { return 0; }  // unconsumed records wait in the file for the next start
  size_t depth() const override;
  size_t ready() const override;

  // Records found unconsumed at open (written to the store before any new one).
  uint64_t recovered() const { return recovered_; }
  // Ring bytes in use (records not yet released, wrap padding included), and the ring's size.
  uint64_t usedBytes() const { return used_.load(std::memory_order_relaxed); }
  uint64_t capacity() const { return capacity_; }
  uint64_t epoch() const { return epoch_; }
  const std::string& path() const { return path_; }

 private:
  struct Taken {
    uint64_t seq;
    uint64_t end;    // ring offset after the entry
    uint64_t bytes;  // ring bytes it frees, wrap padding before it included
  };

  Spool(std::string path, int fd, size_t max_records);
  // A new ring of `capacity` bytes with a new epoch: sizes, reserves, maps and stamps the file.
  [[nodiscard]] Status initialize(uint64_t capacity);
  [[nodiscard]] Status map(uint64_t capacity);
  void unmap();
  // Reads the header of a mapped existing spool and finds the records not yet consumed.
  [[nodiscard]] Status load();
  // A recovered older file now holds this version's entries too: its header says so.
  void stampVersion();
  void recover(uint64_t consumed_seq, uint64_t consumed_off);
  void markConsumed(uint64_t seq, uint64_t offset);
  // Makes the ring's pages the producer writes next writable, on the consumer's thread.
  void prepareAhead();
  // Where the entry at `off` really starts: 0 when fewer than a header's bytes are left.
  uint64_t entryStart(uint64_t off) const;
  void writeWrap(uint64_t off, uint64_t seq);

  const std::string path_;
  int fd_;
  uint8_t* map_ = nullptr;
  uint64_t map_size_ = 0;
  uint8_t* ring_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t epoch_ = 0;
  const size_t max_records_;
  uint64_t recovered_ = 0;

  // Producer.
  uint64_t head_ = 0;  // ring offset of the next entry
  uint64_t next_seq_ = 1;
  // Shared.
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> published_seq_{0};  // last seq appended and readable
  std::atomic<uint64_t> taken_seq_{0};      // last seq the consumer took
  std::atomic<uint64_t> released_seq_{0};   // last seq released (consumed)
  // Consumer.
  uint64_t read_off_ = 0;  // ring offset of the next entry to take
  uint64_t read_seq_ = 1;  // its seq
  uint64_t mark_generation_ = 0;
  std::deque<Taken> taken_;
  bool populate_ = true;  // MADV_POPULATE_WRITE works here (Linux 5.14 and later)
};

// Whether a spool of `capacity` ring bytes at `path` can be reserved now: the free space of its
// file system (the blocks the file already holds count) against what Spool::open reserves. For
// --check-config, start-up and reload (daemon/config.cpp), before any file is made.
[[nodiscard]] Status checkSpoolSpace(const std::string& path, uint64_t capacity);

}  // namespace pgwarden::history
