// warm-eval trace: writes a request trace (docs/eval/traces.md).
//   Azure Functions counts, the mCache methodology:
//     warm-eval trace --invocations FILE --catalog CATALOG --scheme
//     random|round-robin|quantile|quantile-r
//                     [--trigger http] [--cut 0.9] [--start-minute 0] [--minutes 60] [--sample
//                     0.15]
//                     [--seed 1] --out TRACE.csv
//   Synthetic, multi-day (drifting Zipf ranks, daily cycle, Pareto gaps, bursts):
//     warm-eval trace --synthetic --catalog CATALOG [--days 7] [--per-day 20000] [--alpha 0.9]
//                     [--drift 0.05] [--diurnal 0.5] [--pareto 1.5] [--burst-probability 0.001]
//                     [--burst-size 20] [--burst-seconds 60] [--seed 1] --out TRACE.csv
//   Synthetic, Zipf popularity and Poisson arrivals:
//     warm-eval trace --zipf ALPHA (--catalog CATALOG | --models N) --requests R --rate RPS
//                     [--seed 1] --out TRACE.csv
// Prints one JSON object on stdout describing what was written (requests per model, and for
// Azure traces the function counts at each step).
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "eval/catalog.hpp"
#include "eval/trace.hpp"
#include "eval/workload.hpp"

namespace warm::eval_cli {

namespace {

struct trace_args {
  eval::azure_options azure;
  std::string catalog, scheme, out;
  double zipf = 0;
  std::size_t models = 0, requests = 0;
  double rate = 0;
  bool synthetic = false;
  eval::synthetic_options synth;
};

const std::string command = "trace";

int usage(const std::string& message) {
  return report(command, make_error(errc::invalid_argument, message), exit_usage);
}

// Requests per model, in catalog order, for the summary.
nlohmann::ordered_json per_model(const eval::catalog& c, const eval::trace& t,
                                 const eval::azure_stats* st) {
  std::map<std::string, std::uint64_t> requests, functions, invocations;
  for (const auto& r : t)
    ++requests[r.model];
  if (st)
    for (const auto& f : st->assignment) {
      ++functions[f.model];
      invocations[f.model] += f.invocations;
    }
  auto out = nlohmann::ordered_json::array();
  for (const auto& e : c) {
    nlohmann::ordered_json m{{"model", e.model}};
    if (st) {
      m["functions"] = functions[e.model];
      m["invocations"] = invocations[e.model];
    }
    m["requests"] = requests[e.model];
    out.push_back(m);
  }
  return out;
}

int run_azure(trace_args& a, const CLI::App& cmd) {
  for (const char* needed : {"--invocations", "--catalog", "--scheme"})
    if (cmd.count(needed) == 0) return usage(std::string(needed) + " is required (or use --zipf)");
  for (const char* zipf_only : {"--models", "--requests", "--rate"})
    if (cmd.count(zipf_only) > 0) return usage(std::string(zipf_only) + " applies only to --zipf");
  auto scheme = eval::parse_mapping(a.scheme);
  if (!scheme) return usage(scheme.error().message);
  a.azure.scheme = *scheme;
  if (!(a.azure.cut > 0 && a.azure.cut <= 1)) return usage("--cut must be in (0, 1]");
  if (!(a.azure.sample >= 0 && a.azure.sample <= 1)) return usage("--sample must be in [0, 1]");
  if (a.azure.minutes == 0) return usage("--minutes must be at least 1");
  auto models = eval::read_catalog(a.catalog);
  if (!models) return report(command, models.error(), exit_failure);
  eval::azure_stats st;
  auto t = eval::make_azure_trace(a.azure, *models, &st);
  if (!t) return report(command, t.error(), exit_failure);
  if (auto written = eval::write_trace(a.out, *t); !written)
    return report(command, written.error(), exit_failure);
  nlohmann::ordered_json summary{
      {"out", a.out},
      {"source", "azure"},
      {"invocations", a.azure.invocations},
      {"scheme", eval::to_string(a.azure.scheme)},
      {"trigger", st.trigger_column ? a.azure.trigger : "any (the file has no Trigger column)"},
      {"cut", a.azure.cut},
      {"first_minute", st.first_minute},
      {"minutes", a.azure.minutes},
      {"sample", a.azure.sample},
      {"days", a.azure.days},
      {"seed", a.azure.seed},
      {"functions",
       {{"in_file", st.functions},
        {"with_trigger", st.with_trigger},
        {"active", st.active},
        {"kept", st.kept}}},
      {"cut_threshold", st.cut_threshold},
      {"window_invocations", st.window_invocations},
      {"kept_invocations", st.kept_invocations},
      {"requests", t->size()},
      {"last_ms", t->empty() ? 0.0 : t->back().time_ms},
      {"models", per_model(*models, *t, &st)},
  };
  std::cout << summary.dump() << "\n";
  return exit_ok;
}

int run_zipf(const trace_args& a, const CLI::App& cmd) {
  for (const char* azure_only : {"--invocations", "--scheme", "--trigger", "--cut",
                                 "--start-minute", "--minutes", "--sample"})
    if (cmd.count(azure_only) > 0)
      return usage(std::string(azure_only) + " does not apply to --zipf");
  if ((cmd.count("--catalog") > 0) == (cmd.count("--models") > 0))
    return usage("--zipf needs exactly one of --catalog and --models");
  if (cmd.count("--requests") == 0 || cmd.count("--rate") == 0)
    return usage("--zipf needs --requests and --rate");
  if (!(a.zipf >= 0)) return usage("--zipf ALPHA must be >= 0");
  if (!(a.rate > 0)) return usage("--rate must be positive");
  eval::catalog models;
  if (cmd.count("--catalog") > 0) {
    auto read = eval::read_catalog(a.catalog);
    if (!read) return report(command, read.error(), exit_failure);
    models = std::move(*read);
  } else {
    // Only the ids matter to a trace: the ones `warm-eval catalog --models N` writes.
    models = eval::make_catalog(a.models, 1, 1, 0);
  }
  auto t = eval::make_zipf_trace(a.zipf, models, a.requests, a.rate, a.azure.seed);
  if (auto written = eval::write_trace(a.out, t); !written)
    return report(command, written.error(), exit_failure);
  nlohmann::ordered_json summary{
      {"out", a.out},
      {"source", "zipf"},
      {"alpha", a.zipf},
      {"rate", a.rate},
      {"seed", a.azure.seed},
      {"requests", t.size()},
      {"last_ms", t.empty() ? 0.0 : t.back().time_ms},
      {"models", per_model(models, t, nullptr)},
  };
  std::cout << summary.dump() << "\n";
  return exit_ok;
}

const char* const synthetic_only[] = {"--per-day",    "--alpha",        "--drift",
                                      "--diurnal",    "--pareto",       "--burst-probability",
                                      "--burst-size", "--burst-seconds"};

int run_synthetic(trace_args& a, const CLI::App& cmd) {
  for (const char* other : {"--invocations", "--scheme", "--trigger", "--cut", "--start-minute",
                            "--minutes", "--sample", "--zipf", "--models", "--requests", "--rate"})
    if (cmd.count(other) > 0) return usage(std::string(other) + " does not apply to --synthetic");
  if (cmd.count("--catalog") == 0) return usage("--synthetic needs --catalog");
  auto models = eval::read_catalog(a.catalog);
  if (!models) return report(command, models.error(), exit_failure);
  a.synth.seed = a.azure.seed;
  if (cmd.count("--days") > 0) a.synth.days = static_cast<double>(a.azure.days);
  auto t = eval::make_synthetic_trace(a.synth, *models);
  if (!t) return usage(t.error().message);
  if (auto written = eval::write_trace(a.out, *t); !written)
    return report(command, written.error(), exit_failure);
  nlohmann::ordered_json summary{
      {"out", a.out},
      {"source", "synthetic"},
      {"days", a.synth.days},
      {"per_day", a.synth.requests_per_day},
      {"alpha", a.synth.alpha},
      {"drift", a.synth.drift},
      {"diurnal", a.synth.diurnal},
      {"pareto", a.synth.pareto_shape},
      {"burst_probability", a.synth.burst_probability},
      {"burst_size", a.synth.burst_size},
      {"burst_seconds", a.synth.burst_seconds},
      {"seed", a.synth.seed},
      {"requests", t->size()},
      {"last_ms", t->empty() ? 0.0 : t->back().time_ms},
      {"models", per_model(*models, *t, nullptr)},
  };
  std::cout << summary.dump() << "\n";
  return exit_ok;
}

}  // namespace

void add_trace_command(CLI::App& app, int& rc) {
  auto a = std::make_shared<trace_args>();
  auto* cmd = app.add_subcommand(
      "trace",
      "Write a request trace CSV (time_ms,model_id) from Azure Functions counts or a Zipf law");
  cmd->add_option("--invocations", a->azure.invocations,
                  "Azure Functions counts: invocations.csv (with Trigger) or 1340_inv.csv layout");
  cmd->add_option("--catalog", a->catalog, "Catalog CSV whose models the trace requests");
  cmd->add_option("--scheme", a->scheme,
                  "Function-to-model mapping: random, round-robin, quantile or quantile-r");
  cmd->add_option("--trigger", a->azure.trigger,
                  "Keep functions with this Trigger (http, timer, ...) or any")
      ->capture_default_str();
  cmd->add_option("--cut", a->azure.cut, "Drop functions above this popularity quantile, in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--start-minute", a->azure.start_minute,
                  "First minute column used (0 = the file's first)")
      ->capture_default_str();
  cmd->add_option("--minutes", a->azure.minutes, "Minute columns used")->capture_default_str();
  cmd->add_option("--sample", a->azure.sample, "Probability of keeping each invocation")
      ->capture_default_str();
  cmd->add_option("--seed", a->azure.seed, "Seed (times, sampling, random mapping; Zipf draws)")
      ->capture_default_str();
  cmd->add_option("--zipf", a->zipf,
                  "Synthetic trace: Zipf exponent ALPHA over the models in catalog order");
  cmd->add_option("--models", a->models,
                  "--zipf without --catalog: models m000, m001, ... (as `catalog --models N`)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{10'000'000}));
  cmd->add_option("--requests", a->requests, "--zipf: number of requests")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1'000'000'000}));
  cmd->add_option("--rate", a->rate, "--zipf: Poisson arrival rate, requests per second");
  cmd->add_option("--days", a->azure.days,
                  "Azure: play the window this many times, each day sampled anew; --synthetic: "
                  "days of trace")
      ->check(CLI::Range(std::size_t{1}, std::size_t{3650}));
  cmd->add_flag("--synthetic", a->synthetic,
                "Synthetic multi-day trace over --catalog (rank = catalog order)");
  cmd->add_option("--per-day", a->synth.requests_per_day, "--synthetic: mean requests per day")
      ->capture_default_str();
  cmd->add_option("--alpha", a->synth.alpha, "--synthetic: Zipf exponent")->capture_default_str();
  cmd->add_option("--drift", a->synth.drift,
                  "--synthetic: chance per model and day of swapping rank with a random model")
      ->capture_default_str();
  cmd->add_option("--diurnal", a->synth.diurnal, "--synthetic: daily rate amplitude, in [0, 1)")
      ->capture_default_str();
  cmd->add_option("--pareto", a->synth.pareto_shape,
                  "--synthetic: Pareto shape of each model's gaps (> 1), 0 for Poisson")
      ->capture_default_str();
  cmd->add_option("--burst-probability", a->synth.burst_probability,
                  "--synthetic: chance that a request starts a burst")
      ->capture_default_str();
  cmd->add_option("--burst-size", a->synth.burst_size, "--synthetic: extra requests of a burst")
      ->capture_default_str();
  cmd->add_option("--burst-seconds", a->synth.burst_seconds, "--synthetic: a burst's span")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Trace CSV to write (parent directories are created)")
      ->required();
  cmd->callback([a, cmd, &rc] {
    if (a->synthetic) {
      rc = run_synthetic(*a, *cmd);
      return;
    }
    for (const char* only : synthetic_only)
      if (cmd->count(only) > 0) {
        rc = usage(std::string(only) + " applies only to --synthetic");
        return;
      }
    if (cmd->count("--zipf") > 0 && cmd->count("--days") > 0) {
      rc = usage("--days does not apply to --zipf");
      return;
    }
    rc = cmd->count("--zipf") > 0 ? run_zipf(*a, *cmd) : run_azure(*a, *cmd);
  });
}

}  // namespace warm::eval_cli
