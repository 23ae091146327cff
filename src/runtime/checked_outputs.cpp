#include "runtime/checked_outputs.hpp"

namespace warm {

expected<std::vector<tensor>> checked_outputs(expected<std::vector<tensor>> ran, const model_io& io,
                                              const std::string& model, std::uint64_t batch) {
  if (!ran) return ran;
  if (auto fits = check_outputs(*ran, io, batch); !fits)
    return make_error(errc::internal,
                      "model '" + model + "' answered with " + fits.error().message);
  return ran;
}

}  // namespace warm
