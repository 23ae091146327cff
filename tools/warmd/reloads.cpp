#include "reloads.hpp"

#include <spdlog/spdlog.h>

#include "remote_models.hpp"
#include "served_config.hpp"

namespace warm::warmd {

// Re-reads what warmd serves and applies it whole: the number of served models, or why nothing
// changed.
expected<std::uint32_t> reload(runtime& rt, const config& c, bool serving) {
  if (!serving)
    return make_error(
        errc::invalid_argument,
        "nothing to reload: warmd serves no versioned models (--model-config, --serve-repo)");
  auto read = served_models_for(c.model_config, c.serve_repo, c.repo, remote_models(c));
  if (!read) {
    spdlog::error("reload refused, nothing changed: {}", read.error().message);
    return std::move(read).error();
  }
  auto count = static_cast<std::uint32_t>(read->models.size());
  auto applied = rt.serve(std::move(*read)).get();
  if (!applied) {
    spdlog::error("reload refused, nothing changed: {}", applied.error().message);
    return std::move(applied).error();
  }
  spdlog::info("reloaded: serving {} versioned model(s)", count);
  return count;
}

}  // namespace warm::warmd
