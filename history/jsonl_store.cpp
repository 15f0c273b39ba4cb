// The JSON-lines store: one JSON object per record, appended per batch with one write(2). The
// file is opened for each batch, so a log shipper's rotation (move or copytruncate) just works.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "history/json.h"
#include "history/schema.h"
#include "history/store.h"
#include "history/text.h"

namespace pgwarden::history {

namespace {

class JsonlStore final : public Store {
 public:
  explicit JsonlStore(std::string path) : path_(std::move(path)) {}

  const char* name() const override { return "jsonl"; }

  Status open() override {
    const int fd = openFile();
    if (fd < 0) return Status::fail(path_ + ": " + std::strerror(errno));
    ::close(fd);
    return {};
  }

  WriteResult write(std::span<const Record> records) override {
    buffer_.clear();
    for (const Record& r : records) appendLine(r);
    const int fd = openFile();
    if (fd < 0) return {WriteOutcome::kRetry, path_ + ": " + std::strerror(errno)};
    size_t off = 0;
    while (off < buffer_.size()) {
      const ssize_t n = ::write(fd, buffer_.data() + off, buffer_.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string err = std::strerror(errno);
        // Finish a partly written line so the file stays one object per line; the batch is
        // then written again whole (the cut line is not valid JSON and shippers skip it).
        if (off > 0) (void)!::write(fd, "\n", 1);
        ::close(fd);
        return {WriteOutcome::kRetry, path_ + ": " + err};
      }
      off += static_cast<size_t>(n);
    }
    ::close(fd);
    return {};
  }

  Result<int64_t> prune(const Retention&) override { return int64_t{0}; }

 private:
  int openFile() const {
    return ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  }

  void appendLine(const Record& r) {
    const RowValues row(r);
    w_.clear();
    w_.beginObject();
    size_t i = 0;
    for (const Value& v : row.values()) {
      w_.key(kColumns[i++].name);
      switch (v.type) {
        case ColumnType::kTimestamp: w_.string(formatTimestampUs(v.i)); break;
        case ColumnType::kInt: w_.number(v.i); break;
        case ColumnType::kBool: w_.boolean(v.i != 0); break;
        case ColumnType::kText: w_.string(v.text); break;
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
  }

  std::string path_;
  std::string buffer_;
  JsonWriter w_;
};

}  // namespace

std::unique_ptr<Store> makeJsonlStore(const std::string& path) {
  return std::make_unique<JsonlStore>(path);
}

}  // namespace pgwarden::history
