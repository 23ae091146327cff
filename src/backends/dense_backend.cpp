// The dense backend: warm's MLP in safetensors, run by the device itself (OpenBLAS on the host,
// cuBLAS on a GPU). Its bytes on a device are exactly its weights (or a size hint's headroom).
#include "backends/builtin.hpp"
#include "warm/dense_model.hpp"

namespace warm {
namespace {

class dense_backend final : public backend {
 public:
  std::string_view name() const override { return "dense"; }

  bool runs_on(const device&) const override { return true; }

  expected<model_description> describe(const model_location& where) const override {
    auto file = open_model_file(where);
    if (!file) return std::move(file).error();
    model_description d;
    d.kind = "dense";
    d.io = dense_io(file->spec);
    d.predicted_bytes = file->spec.data_bytes;
    d.layers = static_cast<std::uint32_t>(file->spec.layers.size());
    d.activation = std::string(to_string(file->spec.activation));
    return d;
  }

  expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                 memory_reservation reservation,
                                                 load_stats* stats) const override {
    auto file = open_model_file(where);
    if (!file) return make_error(errc::load_failed, file.error().message);
    auto loaded = dev.load_into(*file, std::move(reservation), stats);
    if (!loaded) return std::move(loaded).error();
    return std::unique_ptr<resident_model>(std::move(*loaded));
  }
};

}  // namespace

const backend* dense_backend_instance() {
  static const dense_backend instance;
  return &instance;
}

}  // namespace warm
