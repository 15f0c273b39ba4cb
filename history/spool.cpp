// The memory-mapped history spool: open and recovery (start-up, may block), append (event loop:
// memcpy and atomic stores only), take and release (writer thread). See spool.h for the layout.
#include "history/spool.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <limits>

#include "history/crc32c.h"
#include "history/spool_codec.h"

namespace pgwarden::history {

namespace {

constexpr char kMagic[8] = {'P', 'G', 'W', 'S', 'P', 'O', 'O', 'L'};
// Version 2 checks record entries with CRC-32C; a version 1 file (zlib's CRC-32 throughout) is
// read as it is and stamped version 2 once recovered, so that an older pgwarden refuses it rather
// than stop at the first entry it cannot check.
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOldestVersion = 1;
using spool_layout::kEntryHeader;
using spool_layout::kHeaderSize;
constexpr uint32_t kKindRecord = 1;  // a record checked with zlib's CRC-32 (version 1)
constexpr uint32_t kKindWrap = 2;
constexpr uint32_t kKindRecord32C = 3;  // a record checked with CRC-32C

bool isRecord(uint32_t kind) { return kind == kKindRecord32C || kind == kKindRecord; }

struct EntryHeader {
  uint32_t commit;  // commitWord(seq), stored last
  uint32_t length;  // body bytes
  uint64_t seq;
  uint32_t crc;
  uint32_t kind;
};
static_assert(sizeof(EntryHeader) == kEntryHeader);

// "Consumed up to seq, whose entry ends at offset". Two slots written in turn: a mark cut short
// by a crash fails its CRC and the other, one generation older, is used.
struct ConsumedMark {
  uint64_t seq;
  uint64_t offset;
  uint64_t generation;
  uint32_t crc;
  uint32_t reserved;
};

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  uint64_t capacity;
  uint64_t epoch;
  uint32_t crc;  // of the fields above
  uint32_t reserved;
  ConsumedMark marks[2];
};
static_assert(sizeof(FileHeader) <= kHeaderSize);
static_assert(sizeof(ConsumedMark) == spool_layout::kMarkSize);
constexpr size_t kMarksOffset = offsetof(FileHeader, marks);
static_assert(kMarksOffset == spool_layout::kMarksOffset);

uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

// How much of the ring the consumer makes writable ahead of the producer at each take: more than
// the producer appends between two takes (a batch of records) at any rate the writer keeps up with.
constexpr uint64_t kPrepareAhead = 2u << 20;

uint32_t crcOf(uint32_t crc, const void* p, size_t n) {
  return static_cast<uint32_t>(crc32(crc, static_cast<const Bytef*>(p), static_cast<uInt>(n)));
}

uint32_t entryCrc(uint64_t epoch, const EntryHeader& h, const uint8_t* body) {
  if (h.kind == kKindRecord32C) {
    // One pass over the header's fields as they lie in a buffer, then the body.
    uint8_t fields[sizeof epoch + sizeof h.seq + sizeof h.length + sizeof h.kind];
    std::memcpy(fields, &epoch, sizeof epoch);
    std::memcpy(fields + 8, &h.seq, sizeof h.seq);
    std::memcpy(fields + 16, &h.length, sizeof h.length);
    std::memcpy(fields + 20, &h.kind, sizeof h.kind);
    const uint32_t c = crc32c(0, fields, sizeof fields);
    return h.length == 0 ? c : crc32c(c, body, h.length);
  }
  uint32_t c = crcOf(0, &epoch, sizeof epoch);
  c = crcOf(c, &h.seq, sizeof h.seq);
  c = crcOf(c, &h.length, sizeof h.length);
  c = crcOf(c, &h.kind, sizeof h.kind);
  return h.length == 0 ? c : crcOf(c, body, h.length);
}

uint32_t markCrc(uint64_t epoch, const ConsumedMark& m) {
  uint32_t c = crcOf(0, &epoch, sizeof epoch);
  c = crcOf(c, &m.seq, sizeof m.seq);
  c = crcOf(c, &m.offset, sizeof m.offset);
  return crcOf(c, &m.generation, sizeof m.generation);
}

uint32_t headerCrc(const FileHeader& h) { return crcOf(0, &h, offsetof(FileHeader, crc)); }

// Never 0, so a zeroed (new or cleared) header never reads as committed.
uint32_t commitWord(uint64_t seq) {
  const auto w = static_cast<uint32_t>((seq * 0x9E3779B97F4A7C15ull) >> 32) ^ 0x50475743u;
  return w == 0 ? 1 : w;
}

void storeCommit(uint8_t* entry, uint32_t value) {
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(entry))
      .store(value, std::memory_order_release);
}

EntryHeader readHeader(const uint8_t* p) {
  EntryHeader h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

std::string errnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

uint64_t randomEpoch() {
  uint64_t e = 0;
  while (e == 0) {
    if (getrandom(&e, sizeof e, 0) != static_cast<ssize_t>(sizeof e)) {
      e = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
          (static_cast<uint64_t>(getpid()) << 32);
    }
  }
  return e;
}

// A record that passed its CRC but does not decode cannot happen short of a bug; it is stored as
// an error record saying so rather than vanish.
Record unreadable(uint64_t seq) {
  Record r;
  r.started_at_us = r.finished_at_us = wallClockMicros();
  r.outcome = Outcome::kError;
  r.error_message =
      "pgwarden: history record " + std::to_string(seq) + " could not be read back from the spool";
  return r;
}

}  // namespace

Spool::Spool(std::string path, int fd, size_t max_records)
    : path_(std::move(path)), fd_(fd), max_records_(max_records) {}

Spool::~Spool() {
  unmap();
  if (fd_ >= 0) ::close(fd_);  // also releases the lock
}

Result<std::unique_ptr<Spool>> Spool::open(const SpoolOptions& options) {
  using R = Result<std::unique_ptr<Spool>>;
  // Made here or found: a file this start made and could not reserve is removed again.
  int fd = ::open(options.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const bool created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = ::open(options.path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return R::fail(errnoText(options.path));
  std::unique_ptr<Spool> s(new Spool(options.path, fd, options.max_records));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return R::fail(options.path + ": the spool is in use by another pgwarden process");
    }
    return R::fail(errnoText(options.path + ": lock"));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) return R::fail(errnoText(options.path));
  FileHeader h{};
  const bool has_header = static_cast<uint64_t>(st.st_size) >= kHeaderSize &&
                          pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) &&
                          std::memcmp(h.magic, "\0\0\0\0\0\0\0\0", 8) != 0;
  if (!has_header) {
    // New, or created by a start that died before stamping it: nothing in it to keep.
    if (auto st2 = s->initialize(options.capacity); !st2.ok()) {
      if (created) ::unlink(options.path.c_str());  // still locked by us: no one else has it open
      return R::fail(st2.error());
    }
    return s;
  }
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    return R::fail(options.path + ": not a pgwarden history spool (move it away)");
  }
  if (h.version < kOldestVersion || h.version > kVersion || h.header_size != kHeaderSize) {
    return R::fail(options.path + ": spool version " + std::to_string(h.version) +
                   " is not this pgwarden's (" + std::to_string(kVersion) + ")");
  }
  if (h.crc != headerCrc(h) || h.capacity < kEntryHeader * 2 || h.capacity % 8 != 0 ||
      static_cast<uint64_t>(st.st_size) != kHeaderSize + h.capacity) {
    return R::fail(options.path +
                   ": the spool's header is damaged (move the file away; the "
                   "records in it are lost)");
  }
  if (auto st2 = s->map(h.capacity); !st2.ok()) return R::fail(st2.error());
  if (auto st2 = s->load(); !st2.ok()) return R::fail(st2.error());
  if (h.version != kVersion) s->stampVersion();
  if (s->capacity_ != align8(options.capacity)) {
    if (s->depth() == 0) {
      s->unmap();
      if (auto st2 = s->initialize(options.capacity); !st2.ok()) return R::fail(st2.error());
    } else {
      spdlog::warn(
          "history: the spool {} holds {} records in a ring of {} bytes; "
          "history.spool_size ({} bytes) applies from the first start that finds it empty",
          options.path, s->depth(), s->capacity_, options.capacity);
    }
  }
  return s;
}

Status Spool::initialize(uint64_t capacity) {
  capacity = align8(capacity);
  const uint64_t size = kHeaderSize + capacity;
  // A stale header must not survive a resize: clear it first, stamp it last.
  if (ftruncate(fd_, 0) != 0 || ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return Status::fail(errnoText(path_ + ": sizing the spool"));
  }
  // Reserve the blocks now: a store into a hole of a full file system would be SIGBUS later.
  if (const int rc = posix_fallocate(fd_, 0, static_cast<off_t>(size)); rc != 0) {
    // No sparse file of the full size is left behind (blocks half reserved are given back); an
    // empty file has no header, so the next start sizes it afresh.
    (void)ftruncate(fd_, 0);
    return Status::fail(path_ + ": reserving " + std::to_string(size) +
                        " bytes for the spool: " + std::strerror(rc));
  }
  if (auto s = map(capacity); !s.ok()) return s;
  FileHeader h{};
  h.version = kVersion;
  h.header_size = kHeaderSize;
  h.capacity = capacity;
  h.epoch = randomEpoch();
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.crc = headerCrc(h);
  std::memcpy(map_, &h, sizeof h);
  epoch_ = h.epoch;
  recover(0, 0);
  return {};
}

void Spool::stampVersion() {
  FileHeader h;
  std::memcpy(&h, map_, sizeof h);
  h.version = kVersion;
  h.crc = headerCrc(h);
  std::memcpy(map_, &h, offsetof(FileHeader, marks));
}

Status Spool::map(uint64_t capacity) {
  const uint64_t size = kHeaderSize + capacity;
  if (size > std::numeric_limits<size_t>::max()) return Status::fail(path_ + ": spool too large");
  // MAP_POPULATE: the pages are faulted in here, at start-up, not on the loop's first appends.
  void* p = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_POPULATE, fd_, 0);
  if (p == MAP_FAILED) return Status::fail(errnoText(path_ + ": mapping the spool"));
  map_ = static_cast<uint8_t*>(p);
  map_size_ = size;
  ring_ = map_ + kHeaderSize;
  capacity_ = capacity;
  return {};
}

void Spool::unmap() {
  if (map_ != nullptr) munmap(map_, static_cast<size_t>(map_size_));
  map_ = nullptr;
  ring_ = nullptr;
}

Status Spool::load() {
  FileHeader h;
  std::memcpy(&h, map_, sizeof h);
  epoch_ = h.epoch;
  const ConsumedMark* best = nullptr;
  for (const auto& m : h.marks) {
    if (m.generation == 0 || m.crc != markCrc(epoch_, m)) continue;
    if (best == nullptr || m.generation > best->generation) best = &m;
  }
  uint64_t seq = 0;
  uint64_t offset = 0;
  if (best != nullptr) {
    if (best->offset > capacity_ || best->offset % 8 != 0) {
      return Status::fail(path_ + ": the spool's consumed mark is damaged (move the file away)");
    }
    seq = best->seq;
    offset = best->offset;
    mark_generation_ = best->generation;
  }
  recover(seq, offset);
  return {};
}

uint64_t Spool::entryStart(uint64_t off) const { return capacity_ - off < kEntryHeader ? 0 : off; }

// Walks the ring from the consumed mark while each entry carries the next seq, its commit word
// and a matching CRC; the first that does not is where appending resumes.
void Spool::recover(uint64_t consumed_seq, uint64_t consumed_off) {
  uint64_t off = consumed_off;
  uint64_t seq = consumed_seq + 1;
  uint64_t used = 0;
  uint64_t count = 0;
  for (;;) {
    const uint64_t start = entryStart(off);
    const uint64_t pad = start == off ? 0 : capacity_ - off;
    if (used + pad + kEntryHeader > capacity_) break;
    const EntryHeader h = readHeader(ring_ + start);
    if (h.commit != commitWord(seq) || h.seq != seq) break;
    const uint8_t* body = ring_ + start + kEntryHeader;
    if (h.kind == kKindWrap) {
      if (h.length != 0 || h.crc != entryCrc(epoch_, h, body)) break;
      used += pad + (capacity_ - start);
      off = 0;
      continue;
    }
    const uint64_t total = align8(kEntryHeader + h.length);
    if (!isRecord(h.kind) || start + total > capacity_ || used + pad + total > capacity_ ||
        h.crc != entryCrc(epoch_, h, body)) {
      break;
    }
    used += pad + total;
    off = start + total;
    ++seq;
    ++count;
  }
  head_ = off;
  next_seq_ = seq;
  used_.store(used, std::memory_order_relaxed);
  published_seq_.store(seq - 1, std::memory_order_relaxed);
  taken_seq_.store(consumed_seq, std::memory_order_relaxed);
  released_seq_.store(consumed_seq, std::memory_order_relaxed);
  read_off_ = consumed_off;
  read_seq_ = consumed_seq + 1;
  recovered_ = count;
  taken_.clear();
}

void Spool::writeWrap(uint64_t off, uint64_t seq) {
  EntryHeader h{0, 0, seq, 0, kKindWrap};
  h.crc = entryCrc(epoch_, h, nullptr);
  std::memcpy(ring_ + off, &h, sizeof h);
  storeCommit(ring_ + off, commitWord(seq));
}

bool Spool::push(Record&& r) {
  RecordView v = viewOf(r);
  if (!pushView(v)) return false;
  r.spool_epoch = v.spool_epoch;  // the caller may name the record now (record_uid)
  r.spool_seq = v.spool_seq;
  return true;
}

bool Spool::pushView(RecordView& r) {
  const uint64_t released = released_seq_.load(std::memory_order_acquire);
  if (next_seq_ - 1 - released >= max_records_) return false;
  const size_t body = encodedSize(r);
  const uint64_t total = align8(kEntryHeader + body);
  if (body > std::numeric_limits<uint32_t>::max() || total > capacity_) return false;

  uint64_t start = entryStart(head_);
  if (start + total > capacity_) start = 0;  // no room before the end: wrap
  const uint64_t pad = start == head_ ? 0 : capacity_ - head_;
  const uint64_t used = used_.load(std::memory_order_acquire);
  if (used + pad + total > capacity_) return false;

  const uint64_t seq = next_seq_;
  if (pad >= kEntryHeader) writeWrap(head_, seq);
  uint8_t* entry = ring_ + start;
  encodeRecord(r, entry + kEntryHeader);
  EntryHeader h{0, static_cast<uint32_t>(body), seq, 0, kKindRecord32C};
  h.crc = entryCrc(epoch_, h, entry + kEntryHeader);
  std::memcpy(entry, &h, sizeof h);
  // Clear the commit word where the next entry goes, when that is free space, so that recovery
  // stops there even if an older lap left something there that looks like an entry.
  const uint64_t next = start + total;
  const uint64_t next_start = entryStart(next);
  const uint64_t next_pad = next_start == next ? 0 : capacity_ - next;
  if (used + pad + total + next_pad + kEntryHeader <= capacity_) storeCommit(ring_ + next_start, 0);
  storeCommit(entry, commitWord(seq));  // the record exists from here on

  head_ = next;
  ++next_seq_;
  r.spool_epoch = epoch_;
  r.spool_seq = seq;
  used_.fetch_add(pad + total, std::memory_order_release);
  published_seq_.store(seq, std::memory_order_release);
  return true;
}

size_t Spool::take(std::vector<Record>& out, size_t max) {
  const uint64_t published = published_seq_.load(std::memory_order_acquire);
  size_t n = 0;
  while (n < max && read_seq_ <= published) {
    const uint64_t start = entryStart(read_off_);
    uint64_t pad = start == read_off_ ? 0 : capacity_ - read_off_;
    EntryHeader h = readHeader(ring_ + start);
    uint64_t at = start;
    if (h.kind == kKindWrap && h.seq == read_seq_) {
      pad += capacity_ - start;
      at = 0;
      h = readHeader(ring_);
    }
    if (!isRecord(h.kind) || h.seq != read_seq_) {
      // Only memory corruption gets here: the entry the producer published is not where the
      // ring says. Stop taking rather than read garbage; what was taken is still released.
      spdlog::error(
          "history: spool {}: record {} not found at offset {}; the writer stops "
          "reading the spool",
          path_, read_seq_, at);
      break;
    }
    const uint64_t total = align8(kEntryHeader + h.length);
    if (n == out.size()) out.emplace_back();
    Record& r = out[n];
    if (!decodeRecord(ring_ + at + kEntryHeader, h.length, &r)) r = unreadable(h.seq);
    r.spool_epoch = epoch_;
    r.spool_seq = h.seq;
    taken_.push_back(Taken{h.seq, at + total, pad + total});
    read_off_ = at + total;
    ++read_seq_;
    ++n;
  }
  taken_seq_.store(read_seq_ - 1, std::memory_order_release);
  if (n > 0) prepareAhead();
  return n;
}

// A page of the ring the kernel has written back to the file is write-protected again, and the
// first store into it faults (ext4's page_mkwrite marks it dirty): on the event loop, in
// encodeRecord, a fault every few records and several microseconds each on a virtual machine.
// MADV_POPULATE_WRITE takes those faults here instead, for the stretch the producer writes next
// (from where it was at this take), in one call and without touching the memory, so it cannot
// disturb an entry being written there.
void Spool::prepareAhead() {
  if (!populate_) return;
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t from = read_off_ / page * page;
  uint64_t left = std::min(kPrepareAhead, capacity_);
  while (left > 0) {
    const uint64_t n = std::min(left, capacity_ - from);
    if (madvise(ring_ + from, static_cast<size_t>(n), MADV_POPULATE_WRITE) != 0) {
      populate_ = false;  // an older kernel (EINVAL): the producer takes its faults itself
      spdlog::debug("history: spool {}: no MADV_POPULATE_WRITE ({})", path_, std::strerror(errno));
      return;
    }
    left -= n;
    from = 0;
  }
}

void Spool::release(size_t n) {
  if (n == 0 || taken_.empty()) return;
  uint64_t bytes = 0;
  Taken done{};
  for (size_t i = 0; i < n && !taken_.empty(); ++i) {
    done = taken_.front();
    bytes += done.bytes;
    taken_.pop_front();
  }
  markConsumed(done.seq, done.end);
  released_seq_.store(done.seq, std::memory_order_release);
  used_.fetch_sub(bytes, std::memory_order_release);
}

void Spool::markConsumed(uint64_t seq, uint64_t offset) {
  ConsumedMark m{seq, offset, ++mark_generation_, 0, 0};
  m.crc = markCrc(epoch_, m);
  std::memcpy(map_ + kMarksOffset + (m.generation & 1) * sizeof(ConsumedMark), &m, sizeof m);
}

size_t Spool::depth() const {
  return static_cast<size_t>(published_seq_.load(std::memory_order_acquire) -
                             released_seq_.load(std::memory_order_acquire));
}

size_t Spool::ready() const {
  return static_cast<size_t>(published_seq_.load(std::memory_order_acquire) -
                             taken_seq_.load(std::memory_order_acquire));
}

Status checkSpoolSpace(const std::string& path, uint64_t capacity) {
  const uint64_t need = kHeaderSize + align8(capacity);
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  // Blocks the spool already holds are reused by the reservation.
  uint64_t held = 0;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) held = static_cast<uint64_t>(st.st_blocks) * 512;
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) {
    // A directory made at start (the state directory) or unreadable: the start-up says so itself.
    return {};
  }
  // root may use the blocks kept back for it, as posix_fallocate does for root.
  const uint64_t blocks = ::geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
  const uint64_t free_bytes = blocks * static_cast<uint64_t>(fs.f_frsize);
  if (held >= need || free_bytes >= need - held) return {};
  return Status::fail("cannot reserve " + std::to_string(need) + " bytes for the spool " + path +
                      ": " + dir + " has " + std::to_string(free_bytes) +
                      " bytes free; lower history.spool_size or free space");
}

}  // namespace pgwarden::history
