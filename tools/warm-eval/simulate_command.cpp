// warm-eval simulate: runs a trace through the policies (the daemon's own policy code) and prints
// one JSON object per policy, one per line (JSON is the only format; --json is accepted).
// Capacity in bytes ("2GiB") or as a percentage of the catalog's total bytes ("60%").
#include <cstdio>
#include <sstream>

#include "commands.hpp"
#include "sim_common.hpp"

namespace warm::eval_cli {

void add_simulate_command(CLI::App& app, int& rc) {
  struct options {
    std::string trace, catalog, capacity, policies = "lru,lfu,arc,srrip,gdsf,iam,opt";
    tuning_flags tuning;
  };
  auto o = std::make_shared<options>();
  auto* cmd =
      app.add_subcommand("simulate", "Run a trace through cache policies (JSON per policy)");
  cmd->add_option("--trace", o->trace, "Trace CSV (time_ms,model_id)")->required();
  cmd->add_option("--catalog", o->catalog, "Catalog CSV (model_id,size_bytes,load_ms)")->required();
  cmd->add_option("--capacity", o->capacity, "Device bytes, or P% of the catalog's total bytes")
      ->required();
  cmd->add_option("--policy", o->policies,
                  "Comma-separated policies (" +
                      std::string("lru, lfu, arc, srrip, gdsf, iam, opt, belady-size)"))
      ->capture_default_str();
  add_tuning_flags(*cmd, o->tuning);
  // JSON is simulate's only output, so --json changes nothing; it is accepted so that a script
  // can say what it expects, as it does for `warm-eval replay --json`.
  cmd->add_flag("--json", "Print JSON (the only format: one object per policy per line)");
  cmd->callback([o, &rc] {
    auto models = eval::read_catalog(o->catalog);
    if (!models) return void(rc = report("simulate", models.error(), exit_failure));
    auto requests = eval::read_trace(o->trace);
    if (!requests) return void(rc = report("simulate", requests.error(), exit_failure));
    auto capacity = parse_capacity(o->capacity, *models);
    if (!capacity) return void(rc = report("simulate", capacity.error(), exit_usage));
    policy_options tuning = to_policy_options(o->tuning);
    std::stringstream list(o->policies);
    std::string name;
    rc = exit_ok;
    while (std::getline(list, name, ',')) {
      auto r = eval::simulate(*requests, *models, *capacity, name, tuning);
      if (!r) return void(rc = report("simulate", r.error(), exit_failure));
      std::printf("%s\n", to_json(*r).dump().c_str());
    }
  });
}

}  // namespace warm::eval_cli
