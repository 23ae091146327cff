// warm-bench: benchmarks that print JSON. See docs/benchmarks.md for results and how to rerun.
#include <CLI/CLI.hpp>

#include <iostream>

#include "benches.hpp"
#include "warm/model_writer.hpp"
#include "warm/units.hpp"

int main(int argc, char** argv) {
  CLI::App app{"warm-bench: warm's benchmarks (JSON on stdout)"};
  app.require_subcommand(1);
  int rc = 2;

  warm::bench::load_options load;
  std::string load_bytes = "1GiB";
  auto* load_cmd = app.add_subcommand("load", "Load a model onto the host device vs plain read()");
  load_cmd->add_option("--bytes", load_bytes, "Model size")->capture_default_str();
  load_cmd->add_option("--dir", load.dir, "Directory for the model file (default: a temp dir)");
  load_cmd->add_option("--repeats", load.repeats, "Interleaved load/read pairs")->capture_default_str()->check(CLI::Range(1, 100));
  load_cmd->callback([&] {
    auto bytes = warm::parse_bytes(load_bytes);
    if (!bytes) {
      std::cerr << "warm-bench: " << bytes.error().message << "\n";
      return;
    }
    load.bytes = *bytes;
    rc = warm::bench::run_load(load);
  });

  warm::bench::exec_options exec;
  std::string layers = "256,256";
  auto* exec_cmd = app.add_subcommand("exec", "Direct executor throughput, batch 1");
  exec_cmd->add_option("--layers", layers, "Layer widths")->capture_default_str();
  exec_cmd->add_option("--seconds", exec.seconds, "Duration")->capture_default_str()->check(CLI::Range(0.1, 600.0));
  exec_cmd->add_option("--batch", exec.batch, "Batch size")->capture_default_str()->check(CLI::Range(1, 4096));
  exec_cmd->callback([&] {
    auto widths = warm::parse_widths(layers);
    if (!widths) {
      std::cerr << "warm-bench: " << widths.error().message << "\n";
      return;
    }
    exec.layers = *widths;
    rc = warm::bench::run_exec(exec);
  });

  CLI11_PARSE(app, argc, argv);
  return rc;
}
