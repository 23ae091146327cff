#include "core/weights.hpp"

#include <stdexcept>

namespace warm {

reclaim_fn inline_reclaim() {
  return [](std::function<void()> task) { task(); };
}

weights::weights(std::unique_ptr<resident_model> model, reclaim_fn reclaim)
    : model_(std::move(model)), reclaim_(std::move(reclaim)) {
  if (model_ && !reclaim_) throw std::invalid_argument("weights: a reclaimer is required");
}

weights& weights::operator=(weights&& other) noexcept {
  if (this != &other) {
    std::move(*this).reclaim(nullptr);
    model_ = std::move(other.model_);
    reclaim_ = std::move(other.reclaim_);
  }
  return *this;
}

weights::~weights() {
  std::move(*this).reclaim(nullptr);
}

void weights::reclaim(std::function<void()> then) && {
  if (!model_) {
    if (then) then();
    return;
  }
  // The task owns the model (shared only because a std::function must be copyable) and needs
  // nothing of this handle, which is gone by the time the reclaimer runs it.
  auto task = [model = std::shared_ptr<resident_model>(std::move(model_)),
               then = std::move(then)]() mutable {
    model.reset();  // unloads the model and returns its bytes to the device
    if (then) then();
  };
  reclaim_(std::move(task));
}

}  // namespace warm
