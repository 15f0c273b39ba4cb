// The idle handle behind NextTurn: started by schedule(), stopped before the callback runs so a
// schedule() from inside the callback starts it again for the next turn.
#include "pool/next_turn.h"

#include <utility>

namespace pgwarden::pool {

NextTurn::NextTurn(uv_loop_t* loop, std::function<void()> fn) : loop_(loop), fn_(std::move(fn)) {}

NextTurn::~NextTurn() { close(); }

void NextTurn::schedule() {
  if (closed_) return;
  if (!handle_) {
    handle_ = new uv_idle_t;
    uv_idle_init(loop_, handle_);
    handle_->data = this;
  }
  // Starting an active handle is a no-op; libuv returns an error only for a null callback.
  (void)uv_idle_start(handle_, &NextTurn::onIdle);
}

void NextTurn::close() {
  if (closed_) return;
  closed_ = true;
  if (!handle_) return;
  uv_idle_stop(handle_);
  handle_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(handle_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_idle_t*>(h); });
  handle_ = nullptr;
}

void NextTurn::onIdle(uv_idle_t* h) {
  auto* self = static_cast<NextTurn*>(h->data);
  uv_idle_stop(h);
  if (self) self->fn_();
}

}  // namespace pgwarden::pool
