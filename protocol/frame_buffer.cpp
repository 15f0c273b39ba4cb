// Splits a byte stream into typed v3 messages. The length is checked against the per-type cap as
// soon as the 5-byte header is in, so an oversized message is refused before its body is buffered.
// Message framing:
// https://www.postgresql.org/docs/15/protocol-overview.html#PROTOCOL-MESSAGE-CONCEPTS
#include "protocol/messages.h"

namespace pgwarden::protocol {

namespace {
constexpr size_t kHeader = 5;  // type byte + Int32 length
}  // namespace

void FrameBuffer::append(const char* data, size_t len) {
  if (len == 0) return;
  if (off_ > 0) {
    if (off_ == buf_.size()) {
      buf_.clear();
      off_ = 0;
    } else if (off_ >= buf_.size() / 2 || buf_.size() + len > buf_.capacity()) {
      // Moving the unread tail is cheaper than growing, and it is at most as large as what was
      // skipped, so every byte is moved O(1) times on average.
      buf_.erase(0, off_);
      off_ = 0;
    }
  }
  buf_.append(data, len);
}

FrameStatus FrameBuffer::next(Frame& out, const FrameLimits& limits, bool from_backend) const {
  const size_t avail = size();
  if (avail < kHeader) return FrameStatus::kNeedMore;
  const char* p = data();
  const uint32_t len = readU32(p + 1);  // counts itself but not the type byte
  if (len < 4) return FrameStatus::kBadLength;
  if (len > frameCap(p[0], limits, from_backend)) return FrameStatus::kTooLarge;
  const size_t total = size_t(len) + 1;
  if (avail < total) return FrameStatus::kNeedMore;
  out.type = p[0];
  out.raw = std::string_view(p, total);
  out.body = std::string_view(p + kHeader, total - kHeader);
  return FrameStatus::kFrame;
}

void FrameBuffer::consume(size_t n) {
  off_ += n < size() ? n : size();
  if (off_ == buf_.size()) {
    // Drained: restart at the front for free. Keep the allocation for the next read unless a
    // single large message (a big Bind or DataRow) inflated it; memory per session stays bounded.
    if (buf_.capacity() > kKeepCapacity) {
      std::string().swap(buf_);
    } else {
      buf_.clear();
    }
    off_ = 0;
  }
}

}  // namespace pgwarden::protocol
