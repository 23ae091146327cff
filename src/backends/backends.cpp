#include "backends/builtin.hpp"

namespace warm {
namespace {

std::vector<const backend*> built_in() {
  std::vector<const backend*> all{dense_backend_instance()};
  if (auto* torch = torchscript_backend_instance()) all.push_back(torch);
  return all;
}

const std::vector<const backend*>& all_backends() {
  static const std::vector<const backend*> all = built_in();
  return all;
}

}  // namespace

expected<const backend*> find_backend(std::string_view kind) {
  for (const auto* b : all_backends())
    if (b->name() == kind) return b;
  std::string served;
  for (const auto& k : backend_kinds()) served += (served.empty() ? "" : ", ") + k;
  return make_error(errc::not_found, "no backend serves model kind '" + std::string(kind) + "' in this build (it serves " +
                                         served + ")");
}

std::vector<std::string> backend_kinds() {
  std::vector<std::string> kinds;
  for (const auto* b : all_backends()) kinds.emplace_back(b->name());
  return kinds;
}

expected<model_description> describe_model(const model_location& where) {
  auto b = find_backend(where.kind);
  if (!b) return make_error(errc::invalid_argument, where.path + ": " + b.error().message);
  return (*b)->describe(where);
}

void set_backend_threads(int threads) {
  set_host_blas_threads(threads);
  set_torchscript_threads(threads);
}

bool runs_on(const model_location& where, device& dev) {
  if (auto* host = dev.hosted_models()) return host->serves(where.kind);
  auto b = find_backend(where.kind);
  return b && (*b)->runs_on(dev);
}

}  // namespace warm
