// Runs a callback on a later turn of the loop, never inside the code that asked for it: how the
// pools hand out connections without calling back into their caller (PgBouncer schedules its
// handoffs the same way). A uv_idle handle: while one is due the loop does not sleep in poll.
#pragma once

#include <uv.h>

#include <functional>

namespace pgwarden::pool {

class NextTurn {
 public:
  NextTurn(uv_loop_t* loop, std::function<void()> fn);
  // Closes the handle if close() was not called; it frees itself in its close callback.
  ~NextTurn();
  NextTurn(const NextTurn&) = delete;
  NextTurn& operator=(const NextTurn&) = delete;

  // The callback runs once on the next turn, however often this is called before then. Calls
  // made from inside the callback ask for the turn after. Does nothing after close().
  void schedule();
  // Releases the handle (shutdown: the loop can be closed once its close callback has run).
  void close();

 private:
  static void onIdle(uv_idle_t* h);

  uv_loop_t* loop_;
  std::function<void()> fn_;
  // Made on the first schedule(), so the owner may be built before the loop is initialized.
  uv_idle_t* handle_ = nullptr;
  bool closed_ = false;
};

}  // namespace pgwarden::pool
