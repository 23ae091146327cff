// How the loader pool turns a model file into a resident model. The runtime uses file_loader;
// tests and fault injection substitute their own (failing, slow or gated loaders).
#pragma once

#include <memory>
#include <string>

#include "warm/device.hpp"
#include "warm/error.hpp"
#include "warm/model_repository.hpp"

namespace warm {

class model_loader {
 public:
  virtual ~model_loader() = default;

  // Loads the model at `where` into memory of `dev`, allocated from `reservation` (its bytes were
  // charged before the load started). The file must be opened beneath its repository root
  // (open_located, as every backend does). Runs on a loader-pool thread and may block on I/O; may
  // be called from several threads at once. On failure the reservation's bytes go back to `dev`.
  virtual expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                         memory_reservation reservation,
                                                         load_stats* stats) = 0;
};

// Loads with the backend of the model's kind (warm/backend.hpp).
class file_loader final : public model_loader {
 public:
  expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                 memory_reservation reservation,
                                                 load_stats* stats) override;
};

}  // namespace warm
