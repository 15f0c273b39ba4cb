// Shared pieces of the libFuzzer targets: a cursor that takes sizes and flags from the input's
// bytes (so every choice a target makes is reproducible from the crash file), and a check that
// stops the run with a trap when an invariant breaks, which libFuzzer reports as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::fuzz {

// Reads fuzzer bytes front to back. Running out is not an error: every getter then returns zero
// or an empty view, so a target never needs to check what is left.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(reinterpret_cast<const char*>(data)), n_(size) {}

  size_t remaining() const { return n_; }
  uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return uint8_t(*p_++);
  }
  bool flag() { return (byte() & 1) != 0; }
  // A size in [1, max]: small sizes are the likely ones, as split reads are.
  size_t chunk(size_t max) {
    const size_t b = byte();
    const size_t n = b < 192 ? b % 16 + 1 : (b - 191) * 97;
    return n > max ? max : n;
  }
  std::string_view take(size_t n) {
    if (n > n_) n = n_;
    std::string_view out(p_, n);
    p_ += n;
    n_ -= n;
    return out;
  }
  std::string_view rest() { return take(n_); }
  // Up to the next `sep` (consumed) or to the end.
  std::string_view until(char sep) {
    const std::string_view all(p_, n_);
    const size_t at = all.find(sep);
    if (at == std::string_view::npos) return rest();
    std::string_view out = take(at);
    take(1);
    return out;
  }

 private:
  const char* p_;
  size_t n_;
};

// An invariant of the code under test: when it fails the target stops with a report libFuzzer
// keeps as a crash artifact.
#define PGW_FUZZ_CHECK(cond)                                                               \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);   \
      __builtin_trap();                                                                    \
    }                                                                                      \
  } while (0)

}  // namespace pgwarden::fuzz
