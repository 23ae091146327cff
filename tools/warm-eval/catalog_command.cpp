// warm-eval catalog: writes a model catalog (docs/eval/catalog.md).
//   warm-eval catalog --models N --min-size SIZE --max-size SIZE [--seed S] --out FILE
//   warm-eval catalog --mcache7 --out FILE
// Prints one JSON object on stdout: {"out","models","total_bytes","min_bytes","max_bytes"}.
#include <algorithm>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "eval/catalog.hpp"
#include "eval/workload.hpp"
#include "warm/units.hpp"

namespace warm::eval_cli {

namespace {

struct catalog_args {
  std::size_t models = 0;
  std::string min_size, max_size, out;
  std::uint64_t seed = 1;
  bool mcache7 = false;
  std::string sizes, order = "random";
  double large_share = 0.5;
};

int run_catalog(const catalog_args& a, const CLI::App& cmd) {
  const std::string name = "catalog";
  eval::catalog c;
  if (a.mcache7) {
    c = eval::mcache7_catalog();
  } else {
    if (cmd.count("--models") == 0 || cmd.count("--min-size") == 0 || cmd.count("--max-size") == 0)
      return report(name,
                    make_error(errc::invalid_argument,
                               "give --models, --min-size and --max-size (or --mcache7)"),
                    exit_usage);
    auto min = parse_bytes(a.min_size);
    if (!min)
      return report(name, make_error(errc::invalid_argument, "--min-size: " + min.error().message),
                    exit_usage);
    auto max = parse_bytes(a.max_size);
    if (!max)
      return report(name, make_error(errc::invalid_argument, "--max-size: " + max.error().message),
                    exit_usage);
    if (*min == 0 || *min > *max)
      return report(
          name,
          make_error(errc::invalid_argument, "sizes must satisfy 1 <= --min-size <= --max-size"),
          exit_usage);
    if (cmd.count("--sizes") == 0) {
      if (cmd.count("--order") > 0 || cmd.count("--large-share") > 0)
        return report(name,
                      make_error(errc::invalid_argument, "--order and --large-share need --sizes"),
                      exit_usage);
      c = eval::make_catalog(a.models, *min, *max, a.seed);
    } else {
      eval::shaped_catalog_options o;
      auto shape = eval::parse_size_shape(a.sizes);
      if (!shape) return report(name, shape.error(), exit_usage);
      auto order = eval::parse_size_order(a.order);
      if (!order) return report(name, order.error(), exit_usage);
      o.models = a.models;
      o.shape = *shape;
      o.order = *order;
      o.min_size = *min;
      o.ratio = static_cast<double>(*max) / static_cast<double>(*min);
      o.large_share = a.large_share;
      o.seed = a.seed;
      auto made = eval::make_shaped_catalog(o);
      if (!made) return report(name, made.error(), exit_usage);
      c = std::move(*made);
    }
  }
  if (auto written = eval::write_catalog(a.out, c); !written)
    return report(name, written.error(), exit_failure);
  auto [lo, hi] =
      std::minmax_element(c.begin(), c.end(), [](auto& x, auto& y) { return x.bytes < y.bytes; });
  nlohmann::ordered_json summary{{"out", a.out},
                                 {"models", c.size()},
                                 {"total_bytes", eval::total_bytes(c)},
                                 {"min_bytes", lo->bytes},
                                 {"max_bytes", hi->bytes}};
  std::cout << summary.dump() << "\n";
  return exit_ok;
}

}  // namespace

void add_catalog_command(CLI::App& app, int& rc) {
  auto args = std::make_shared<catalog_args>();
  auto* cmd =
      app.add_subcommand("catalog", "Write a model catalog CSV (model_id,size_bytes,load_ms)");
  auto* mcache7 =
      cmd->add_flag("--mcache7", args->mcache7,
                    "The mCache paper's seven models (what docs/eval/catalog-mcache7.csv holds)");
  cmd->add_option("--models", args->models, "Synthetic models m000, m001, ...")
      ->check(CLI::Range(std::size_t{1}, std::size_t{10'000'000}))
      ->excludes(mcache7);
  cmd->add_option("--min-size", args->min_size, "Smallest model size, e.g. 50MB or 64MiB")
      ->excludes(mcache7);
  cmd->add_option("--max-size", args->max_size,
                  "Largest model size (sizes are log-uniform in between)")
      ->excludes(mcache7);
  cmd->add_option("--sizes", args->sizes,
                  "Size shape: uniform (all --min-size), two-class (--min-size and --max-size), "
                  "log-uniform")
      ->excludes(mcache7);
  cmd->add_option("--order", args->order,
                  "With --sizes: sizes against rank (catalog order = popularity): random, "
                  "ascending (popular = small) or descending (popular = large)")
      ->excludes(mcache7);
  cmd->add_option("--large-share", args->large_share,
                  "With --sizes two-class: share of the models at --max-size")
      ->excludes(mcache7);
  cmd->add_option("--seed", args->seed, "Seed of the sizes")
      ->capture_default_str()
      ->excludes(mcache7);
  cmd->add_option("--out", args->out, "Catalog CSV to write (parent directories are created)")
      ->required();
  cmd->callback([args, cmd, &rc] { rc = run_catalog(*args, *cmd); });
}

}  // namespace warm::eval_cli
