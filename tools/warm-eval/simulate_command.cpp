// warm-eval simulate: runs a trace through the policies (the daemon's own policy code) and prints
// one JSON object per policy, one per line (JSON is the only format; --json is accepted).
// Capacity in bytes ("2GiB") or as a percentage of the catalog's total bytes ("60%").
// With --instances N, a cluster of N instances shares that capacity evenly, and every policy runs
// under every --placement rule (one line per pair): the cluster's own placement code, with loads
// that take time (docs/cluster.md).
#include <cstdio>
#include <sstream>
#include <vector>

#include "commands.hpp"
#include "policy/cache_policy.hpp"
#include "ranking/ranking.hpp"
#include "sim_common.hpp"

namespace warm::eval_cli {
namespace {

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(item);
  return out;
}

}  // namespace

// Every policy the daemon has, the size-aware offline bound, and the exact optimum where it runs
// (catalogs of at most opt_max_models models).
static std::string default_policies(std::size_t models) {
  std::string out;
  for (const auto& name : policy_names())
    out += name + ",";
  out += "belady-size";
  if (models <= eval::opt_max_models) out += ",opt";
  return out;
}

void add_simulate_command(CLI::App& app, int& rc) {
  struct options {
    std::string trace, catalog, capacity, policies;  // empty: default_policies
    tuning_flags tuning;
    std::size_t instances = 0;
    std::string placements = "warm,modelmesh";
    double record_seconds = 2;
    std::uint32_t loading_threads = 1;
  };
  auto o = std::make_shared<options>();
  auto* cmd =
      app.add_subcommand("simulate", "Run a trace through cache policies (JSON per policy)");
  cmd->add_option("--trace", o->trace, "Trace CSV (time_ms,model_id)")->required();
  cmd->add_option("--catalog", o->catalog, "Catalog CSV (model_id,size_bytes,load_ms)")->required();
  cmd->add_option("--capacity", o->capacity,
                  "Device bytes, or P% of the catalog's total bytes (with --instances: the "
                  "cluster's, split evenly)")
      ->required();
  std::string online;
  for (const auto& name : policy_names())
    online += (online.empty() ? "" : ", ") + name;
  auto* policy = cmd->add_option(
      "--policy", o->policies,
      "Comma-separated policies: " + online +
          " (online), belady-size and opt (offline bounds; opt for catalogs of at most " +
          std::to_string(eval::opt_max_models) +
          " models). Default: every online policy and belady-size, and opt where it "
          "applies; with --instances, kdf,lru");
  add_tuning_flags(*cmd, o->tuning);
  cmd->add_option("--instances", o->instances, "Simulate a cluster of N instances")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--placement", o->placements,
                  "With --instances: comma-separated rules (warm, modelmesh)")
      ->capture_default_str();
  cmd->add_option(
         "--record-seconds", o->record_seconds,
         "With --instances: seconds between instance records (0 = fresh at every placement)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--loading-threads", o->loading_threads,
                  "With --instances: loads each instance runs at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  // JSON is simulate's only output, so --json changes nothing; it is accepted so that a script
  // can say what it expects, as it does for `warm-eval replay --json`.
  cmd->add_flag("--json", "Print JSON (the only format: one object per policy per line)");
  cmd->callback([o, policy, &rc] {
    auto models = eval::read_catalog(o->catalog);
    if (!models) return void(rc = report("simulate", models.error(), exit_failure));
    auto requests = eval::read_trace(o->trace);
    if (!requests) return void(rc = report("simulate", requests.error(), exit_failure));
    auto capacity = parse_capacity(o->capacity, *models);
    if (!capacity) return void(rc = report("simulate", capacity.error(), exit_usage));
    policy_options tuning = to_policy_options(o->tuning);
    rc = exit_ok;
    if (o->instances == 0) {
      for (auto& name :
           split(o->policies.empty() ? default_policies(models->size()) : o->policies)) {
        auto r = eval::simulate(*requests, *models, *capacity, name, tuning);
        if (!r) return void(rc = report("simulate", r.error(), exit_failure));
        std::printf("%s\n", to_json(*r).dump().c_str());
      }
      return;
    }
    std::vector<ranking::placement_rule> rules;
    for (auto& name : split(o->placements)) {
      auto rule = ranking::parse_placement_rule(name);
      if (!rule) return void(rc = report("simulate", rule.error(), exit_usage));
      rules.push_back(*rule);
    }
    eval::cluster_options cluster;
    cluster.instances = o->instances;
    cluster.instance_capacity = *capacity / o->instances;
    cluster.record_seconds = o->record_seconds;
    cluster.loading_threads = o->loading_threads;
    cluster.tuning = tuning;
    for (auto& name : split(policy->count() ? o->policies : "kdf,lru")) {
      for (auto rule : rules) {
        cluster.policy = name;
        cluster.placement = rule;
        auto r = eval::simulate_cluster(*requests, *models, cluster);
        if (!r) return void(rc = report("simulate", r.error(), exit_failure));
        std::printf("%s\n", to_json(*r).dump().c_str());
        std::fflush(stdout);
      }
    }
  });
}

}  // namespace warm::eval_cli
