// At most one log line per interval for an event that can repeat at the rate of an attack
// (a refused connection, say): the lines in between are counted, and the next line written
// says how many were left out, so a flood costs the log one line a second.
#pragma once

#include <cstdint>

namespace pgwarden {

class LogThrottle {
 public:
  explicit LogThrottle(uint64_t interval_ms = 1000) : interval_ms_(interval_ms) {}

  // True when a line may be written at `now_ms`; `left_out` is then the number of lines held
  // back since the last one written. False: this line is counted and left out.
  bool allow(uint64_t now_ms, uint64_t& left_out) {
    if (written_ && now_ms - last_ms_ < interval_ms_) {
      ++left_out_;
      return false;
    }
    written_ = true;
    last_ms_ = now_ms;
    left_out = left_out_;
    left_out_ = 0;
    return true;
  }

 private:
  uint64_t interval_ms_;
  uint64_t last_ms_ = 0;
  uint64_t left_out_ = 0;
  bool written_ = false;
};

}  // namespace pgwarden
