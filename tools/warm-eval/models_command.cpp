// warm-eval models: materializes a catalog as dense model files, so a live warmd can serve it.
//   warm-eval models --catalog CATALOG --repo DIR [--scale F]
// Each model becomes DIR/<model_id>/1/model.safetensors with a data buffer of about
// size_bytes × F bytes (F = 1 by default; e.g. 0.01 keeps the catalog's proportions at 1%), and
// a catalog of what was written (real sizes; load_ms kept from the input) goes to
// DIR/catalog.csv. Prints one JSON object: {"repo","models","total_bytes","scale"}.
#include <cmath>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "eval/catalog.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

namespace warm::eval_cli {

void add_models_command(CLI::App& app, int& rc) {
  struct args {
    std::string catalog, repo;
    double scale = 1.0;
  };
  auto a = std::make_shared<args>();
  auto* cmd = app.add_subcommand(
      "models", "Write a catalog's models as dense model files (for a live warmd)");
  cmd->add_option("--catalog", a->catalog, "Catalog CSV (model_id,size_bytes,load_ms)")->required();
  cmd->add_option("--repo", a->repo, "Repository root to write into")->required();
  cmd->add_option("--scale", a->scale, "Size factor applied to every model")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1.0));
  cmd->callback([a, &rc] {
    auto models = eval::read_catalog(a->catalog);
    if (!models) return void(rc = report("models", models.error(), exit_failure));
    eval::catalog written;
    std::uint64_t seed = 1;
    for (auto& m : *models) {
      auto bytes =
          static_cast<std::uint64_t>(std::llround(static_cast<double>(m.bytes) * a->scale));
      auto widths = widths_for_bytes(std::max<std::uint64_t>(bytes, 4096));
      auto path = a->repo + "/" + m.model + "/1/" + model_file_name;
      if (auto r = write_dense_model(path, {widths, activation::relu, seed++}); !r)
        return void(rc = report("models", r.error(), exit_failure));
      written.push_back({m.model, dense_data_bytes(widths), m.load_ms});
    }
    if (auto r = eval::write_catalog(a->repo + "/catalog.csv", written); !r)
      return void(rc = report("models", r.error(), exit_failure));
    nlohmann::ordered_json out{{"repo", a->repo},
                               {"models", written.size()},
                               {"total_bytes", eval::total_bytes(written)},
                               {"scale", a->scale}};
    std::printf("%s\n", out.dump().c_str());
    rc = exit_ok;
  });
}

}  // namespace warm::eval_cli
