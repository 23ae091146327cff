// A loaded model's weights, owned: the loader worker makes them, the loader pool's messages carry
// them, and a serving slot holds them while the model serves.
//
// Freeing weights unmaps memory, frees device memory or waits on a model runtime's answer (up to
// seconds); on a thread that runs actors it would stall every actor that thread serves. So a
// weights handle frees only through the reclaimer it was made with, wherever it is dropped: a
// message CAF discards, a handler that returns early, a slot's last lease. It has no reset and no
// release: giving weights up means dropping the handle (the bytes are back once the reclaimer has
// run) or reclaim(then) to be told when they are.
#pragma once

#include <functional>
#include <memory>

#include "warm/device.hpp"

namespace warm {

// Runs a task off the caller's thread, soon (the runtime's reclaimer thread). Required wherever
// weights are made; tests that may free on their own thread pass inline_reclaim().
using reclaim_fn = std::function<void(std::function<void()> task)>;

// Runs the task at once, on the calling thread.
reclaim_fn inline_reclaim();

class weights {
 public:
  weights() = default;
  // std::invalid_argument when `model` is set and `reclaim` is empty.
  weights(std::unique_ptr<resident_model> model, reclaim_fn reclaim);
  weights(weights&& other) noexcept = default;
  // What this handle held goes to its reclaimer first.
  weights& operator=(weights&& other) noexcept;
  weights(const weights&) = delete;
  weights& operator=(const weights&) = delete;
  // Hands what it holds to the reclaimer.
  ~weights();

  explicit operator bool() const { return model_ != nullptr; }
  resident_model& operator*() const { return *model_; }
  resident_model* operator->() const { return model_.get(); }

  // Frees the weights on the reclaimer, then runs `then` there, after their bytes are back. An
  // empty handle runs `then` at once. Leaves this handle empty.
  void reclaim(std::function<void()> then) &&;

 private:
  std::unique_ptr<resident_model> model_;
  reclaim_fn reclaim_;
};

}  // namespace warm
