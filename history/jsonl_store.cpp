// The JSON-lines store: one JSON object per record, appended per batch with one write(2). The
// file is opened for each batch, so a log shipper's rotation (move or copytruncate) just works.
// A file has no unique index: the last record_uid in it (read at open, then kept) tells which
// records the spool hands over again after a crash are there already.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "history/json.h"
#include "history/schema.h"
#include "history/store.h"
#include "history/text.h"

namespace pgwarden::history {

namespace {

struct SpoolPosition {
  uint64_t epoch = 0;
  uint64_t seq = 0;
};

// How far back from the end of the file to look for the last record_uid.
constexpr size_t kTailScanBytes = 1 << 20;

// The record_uid of the last whole line that has one. record_uid is the last key of every line,
// so a line written whole ends `,"record_uid":"<uid>"}` (or `...:null}`); a quote inside a JSON
// string is escaped, so no value can end a line that way. A line cut by a failed write does not.
SpoolPosition lastWrittenUid(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string tail;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    const auto size = static_cast<size_t>(st.st_size);
    tail.resize(std::min(size, kTailScanBytes));
    const ssize_t n = pread(fd, tail.data(), tail.size(), static_cast<off_t>(size - tail.size()));
    tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  static constexpr std::string_view kKey = ",\"record_uid\":\"";
  for (size_t nl = tail.rfind('\n'); nl != std::string::npos && nl > 0;
       nl = tail.rfind('\n', nl - 1)) {
    const std::string_view line(tail.data(), nl);
    if (line.size() < 2 || line.substr(line.size() - 2) != "\"}") continue;
    const size_t key = line.rfind(kKey);
    if (key == std::string_view::npos) continue;
    const size_t from = key + kKey.size();
    SpoolPosition p;
    if (parseRecordUid(line.substr(from, line.size() - 2 - from), &p.epoch, &p.seq)) return p;
  }
  return {};
}

// The chain fields of the last whole line of `instance` in the file: the tail first, the whole
// file when the tail has none (an instance that has not written lately).
Result<ChainTail> lastChainedLine(const std::string& path, std::string_view instance) {
  ChainTail tail;
  bool found = false;
  auto consider = [&](std::string_view line) {
    if (line.size() < 2 || line.back() != '}' || line.find("\"chain_seq\":") == line.npos) return;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    const auto inst = j.find("instance_id");
    const auto seq = j.find("chain_seq");
    if (inst == j.end() || !inst->is_string() || inst->get_ref<const std::string&>() != instance) {
      return;
    }
    if (seq == j.end() || !seq->is_number_unsigned() || seq->get<uint64_t>() == 0) return;
    tail.seq = seq->get<uint64_t>();
    tail.key_id = j.value("chain_key", "");
    if (!parseChainHash(j.value("chain_hash", ""), &tail.hash)) tail.hash = {};
    found = true;
  };
  std::ifstream in(path, std::ios::binary);
  if (!in) return tail;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(std::max<std::streamoff>(0, in.tellg()));
  for (const size_t from : {size > kTailScanBytes ? size - kTailScanBytes : size_t{0}, size_t{0}}) {
    in.clear();
    in.seekg(static_cast<std::streamoff>(from));
    std::string line;
    if (from > 0) std::getline(in, line);  // a partial line
    while (std::getline(in, line)) consider(line);
    if (found || from == 0) break;
  }
  return tail;
}

class JsonlStore final : public Store {
 public:
  explicit JsonlStore(std::string path) : path_(std::move(path)) {}

  const char* name() const override { return "jsonl"; }

  Status open() override {
    const int fd = openFile();
    if (fd < 0) return Status::fail(path_ + ": " + std::strerror(errno));
    ::close(fd);
    last_ = lastWrittenUid(path_);
    return {};
  }

  WriteResult write(std::span<const Record> records) override {
    buffer_.clear();
    ends_.clear();
    for (const Record& r : records) {
      // Written before a crash, handed over again by the spool: the file has it already.
      if (r.spool_seq != 0 && r.spool_epoch == last_.epoch && r.spool_seq <= last_.seq) continue;
      if (auto s = appendLine(r); !s.ok()) {
        if (chain_) chain_->reset();
        return {WriteOutcome::kRetry, path_ + ": " + s.error()};
      }
      ends_.push_back({buffer_.size(), r.spool_epoch, r.spool_seq});
    }
    if (buffer_.empty()) return {};
    const int fd = openFile();
    if (fd < 0) return {WriteOutcome::kRetry, path_ + ": " + std::strerror(errno)};
    size_t off = 0;
    while (off < buffer_.size()) {
      const ssize_t n = ::write(fd, buffer_.data() + off, buffer_.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string err = std::strerror(errno);
        // Finish a partly written line so the file stays one object per line; the batch is
        // then written again, but for the lines that made it whole.
        if (off > 0) (void)!::write(fd, "\n", 1);
        ::close(fd);
        noteWritten(off);
        if (chain_) chain_->reset();  // read back from the lines that made it whole
        return {WriteOutcome::kRetry, path_ + ": " + err};
      }
      off += static_cast<size_t>(n);
    }
    ::close(fd);
    noteWritten(off);
    if (chain_) chain_->commit();
    return {};
  }

  Result<int64_t> prune(const Retention&) override { return int64_t{0}; }

 private:
  int openFile() const {
    return ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  }

  Status appendLine(const Record& r) {
    row_.assign(r);
    if (chain_) {
      if (auto s =
              chain_->link(row_, [this](std::string_view i) { return lastChainedLine(path_, i); });
          !s.ok()) {
        return s;
      }
    }
    w_.clear();
    w_.beginObject();
    size_t i = 0;
    for (const Value& v : row_.values()) {
      w_.key(kColumns[i++].name);
      switch (v.type) {
        case ColumnType::kTimestamp: w_.string(v.text); break;
        case ColumnType::kInt: w_.number(v.i); break;
        case ColumnType::kBool: w_.boolean(v.i != 0); break;
        case ColumnType::kText: w_.string(v.text); break;
        case ColumnType::kUid:
          if (v.text.empty()) {
            w_.null();
          } else {
            w_.string(v.text);
          }
          break;
        case ColumnType::kJson:
          // tables is built by RowValues; guard_actions was checked by prepareRecord.
          if (isJsonValue(v.text)) {
            w_.raw(v.text);
          } else {
            w_.string(v.text);
          }
          break;
      }
    }
    w_.endObject();
    buffer_ += w_.str();
    buffer_.push_back('\n');
    return {};
  }

  // The last spool record among the first `bytes` of buffer_ that are now in the file whole.
  void noteWritten(size_t bytes) {
    for (const LineEnd& e : ends_) {
      if (e.end > bytes) break;
      if (e.seq != 0) last_ = SpoolPosition{e.epoch, e.seq};
    }
  }

  struct LineEnd {
    size_t end;
    uint64_t epoch;
    uint64_t seq;
  };

  std::string path_;
  std::string buffer_;
  std::vector<LineEnd> ends_;
  SpoolPosition last_;
  JsonWriter w_;
  RowValues row_;  // reused for every line
};

}  // namespace

std::unique_ptr<Store> makeJsonlStore(const std::string& path) {
  return std::make_unique<JsonlStore>(path);
}

}  // namespace pgwarden::history
