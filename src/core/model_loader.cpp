#include "warm/model_loader.hpp"

#include "warm/backend.hpp"

namespace warm {

expected<std::unique_ptr<resident_model>> file_loader::load(device& dev,
                                                            const model_location& where,
                                                            memory_reservation reservation,
                                                            load_stats* stats) {
  if (auto* host = dev.hosted_models()) {
    if (!host->serves(where.kind))
      return make_error(errc::load_failed, where.path + ": device " + dev.name() +
                                               " does not serve " + where.kind + " models");
    return host->load_model(where, std::move(reservation), stats);
  }
  auto b = find_backend(where.kind);
  if (!b) return make_error(errc::load_failed, where.path + ": " + b.error().message);
  if (!(*b)->runs_on(dev))
    return make_error(errc::load_failed, where.path + ": device " + dev.name() + " cannot run " +
                                             where.kind + " models");
  return (*b)->load(dev, where, std::move(reservation), stats);
}

}  // namespace warm
