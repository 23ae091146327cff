#include "warm/model_loader.hpp"

namespace warm {

expected<std::unique_ptr<resident_model>> file_loader::load(device& dev, const model_location& where,
                                                            memory_reservation reservation, load_stats* stats) {
  auto file = open_model_file(where);
  if (!file) return make_error(errc::load_failed, file.error().message);
  return dev.load_into(*file, std::move(reservation), stats);
}

}  // namespace warm
