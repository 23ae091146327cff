// warm-eval simulate: runs a trace through the policies (the daemon's own policy code) and prints
// one JSON object per policy, one per line (JSON is the only format; --json is accepted).
// Capacity in bytes ("2GiB") or as a percentage of the catalog's total bytes ("60%").
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "eval/simulator.hpp"
#include "warm/units.hpp"

namespace warm::eval_cli {
namespace {

expected<std::uint64_t> parse_capacity(const std::string& text, const eval::catalog& models) {
  if (!text.empty() && text.back() == '%') {
    try {
      std::size_t used = 0;
      double pct = std::stod(text.substr(0, text.size() - 1), &used);
      if (used != text.size() - 1 || !(pct > 0) || pct > 1000) throw std::invalid_argument("range");
      return static_cast<std::uint64_t>(static_cast<double>(eval::total_bytes(models)) * pct / 100);
    } catch (const std::exception&) {
      return make_error(errc::invalid_argument, "bad capacity '" + text + "' (expected BYTES or P%, e.g. 60%)");
    }
  }
  return parse_bytes(text);
}

}  // namespace

void add_simulate_command(CLI::App& app, int& rc) {
  struct options {
    std::string trace, catalog, capacity, policies = "lru,lfu,arc,srrip,gdsf,iam,opt";
    double rescore_s = 1.0;
    double kdf_tau_s = 1200;
    double kdf_window_s = 600;
    double kdf_horizon = 0.2;
  };
  auto o = std::make_shared<options>();
  auto* cmd = app.add_subcommand("simulate", "Run a trace through cache policies (JSON per policy)");
  cmd->add_option("--trace", o->trace, "Trace CSV (time_ms,model_id)")->required();
  cmd->add_option("--catalog", o->catalog, "Catalog CSV (model_id,size_bytes,load_ms)")->required();
  cmd->add_option("--capacity", o->capacity, "Device bytes, or P% of the catalog's total bytes")->required();
  cmd->add_option("--policy", o->policies, "Comma-separated policies (" + std::string("lru, lfu, arc, srrip, gdsf, iam, opt, belady-size)"))
      ->capture_default_str();
  cmd->add_option("--kdf-tau", o->kdf_tau_s, "kdf: decay time constant of request counts, seconds (0 = none)")
      ->capture_default_str();
  cmd->add_option("--kdf-window", o->kdf_window_s, "kdf: time constant of the experts' costs, seconds")->capture_default_str();
  cmd->add_option("--kdf-horizon", o->kdf_horizon, "kdf: value saturation h (0 = linear)")->capture_default_str();
  cmd->add_option("--rescore", o->rescore_s, "iam: seconds of trace time between heap rebuilds")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
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
    policy_options tuning;
    tuning.rescore_period = std::chrono::duration<double>(o->rescore_s);
    tuning.kdf_tau = std::chrono::duration<double>(o->kdf_tau_s);
    tuning.kdf_horizon = o->kdf_horizon;
    tuning.kdf_window = std::chrono::duration<double>(o->kdf_window_s);
    std::stringstream list(o->policies);
    std::string name;
    rc = exit_ok;
    while (std::getline(list, name, ',')) {
      auto r = eval::simulate(*requests, *models, *capacity, name, tuning);
      if (!r) return void(rc = report("simulate", r.error(), exit_failure));
      nlohmann::ordered_json out{{"policy", r->policy},
                                 {"capacity_bytes", r->capacity_bytes},
                                 {"requests", r->requests},
                                 {"hits", r->hits},
                                 {"misses", r->misses},
                                 {"hit_ratio", r->hit_ratio},
                                 {"byte_miss_ratio", r->byte_miss_ratio},
                                 {"load_ms_total", r->load_ms_total},
                                 {"load_ms_per_request", r->load_ms_per_request},
                                 {"evictions", r->evictions}};
      std::printf("%s\n", out.dump().c_str());
    }
  });
}

}  // namespace warm::eval_cli
