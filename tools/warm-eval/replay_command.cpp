// warm-eval replay: plays a trace against a live warmd, open loop, and measures what clients see.
//   warm-eval replay --connect ADDR --trace TRACE.csv [--speed X] [--register CATALOG]
//                    [--repo DIR] [--out requests.csv] [--json] [--token-file F] [--timeout S]
// Steps, each failing with a one-line error and exit status 1 (2 for a bad command line):
//  1. Read the trace (docs/eval/traces.md); an empty trace is refused. With --register, read the
//     catalog and refuse a trace that names a model the catalog lacks.
//  2. With --repo (the daemon's repository root, on this machine), read each model's input width
//     from its file. Connect; with --register, register every catalog model (id = path =
//     model_id); check that the daemon knows every model of the trace.
//  3. Without --repo, learn each width from the daemon (replay_client::probe_width: the model's
//     status, which loads nothing).
//  4. Replay (replay.hpp: open loop at time_ms / speed, one infer of batch 1 per request).
//  5. Write the per-request CSV (--out) and print the summary: a few lines, or with --json one
//     line {"scenario":"replay","requests","errors","hit_ratio","latency_ms_mean",
//     "latency_ms_p50","latency_ms_p99","load_wait_ms_mean","duration_s","lag_ms_max",
//     "hits","latency_ms_max","load_wait_ms_p99","in_flight_max","speed","address"}.
// A request answered with an error status (or timed out) is counted in "errors" and does not
// change the exit status; a connection that breaks mid-replay does (1).
#include <cstdio>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "../warmctl/connection.hpp"
#include "commands.hpp"
#include "eval/support.hpp"
#include "replay.hpp"

namespace warm::eval_cli {
namespace {

struct replay_args {
  std::string address, trace, catalog, repo, out, token_file;
  double speed = 1;
  double timeout_s = 300;
  std::uint64_t seed = 1;
  bool json = false;
};

// The trace's models in order of first appearance.
std::vector<std::string> models_of(const eval::trace& t) {
  std::vector<std::string> models;
  std::set<std::string> seen;
  for (const auto& r : t)
    if (seen.insert(r.model).second) models.push_back(r.model);
  return models;
}

expected<void> check_against_catalog(const eval::trace& t, const eval::catalog& c,
                                     const replay_args& a) {
  std::set<std::string> ids;
  for (const auto& m : c)
    ids.insert(m.model);
  for (std::size_t i = 0; i < t.size(); ++i)
    if (!ids.count(t[i].model))
      return make_error(errc::invalid_argument,
                        a.trace + ": request " + std::to_string(i + 1) + " (time_ms " +
                            eval::detail::format_double(t[i].time_ms) + ") names model '" +
                            t[i].model + "', which catalog " + a.catalog + " does not list");
  return {};
}

void print_human(const replay_summary& s, const replay_args& a) {
  std::printf("replay of %s against %s at speed %g\n", a.trace.c_str(), a.address.c_str(), a.speed);
  std::printf("  requests   %zu (%zu errors), %zu hits: hit ratio %.3f\n", s.requests, s.errors,
              s.hits, s.hit_ratio);
  std::printf("  latency    mean %.2f ms, p50 %.2f, p99 %.2f, max %.2f\n", s.latency_ms_mean,
              s.latency_ms_p50, s.latency_ms_p99, s.latency_ms_max);
  std::printf("  load wait  mean %.2f ms, p99 %.2f\n", s.load_wait_ms_mean, s.load_wait_ms_p99);
  std::printf("  duration   %.2f s, sends at most %.2f ms late, at most %zu in flight\n",
              s.duration_s, s.lag_ms_max, s.in_flight_max);
}

void print_json(const replay_summary& s, const replay_args& a) {
  nlohmann::ordered_json out{{"scenario", "replay"},
                             {"requests", s.requests},
                             {"errors", s.errors},
                             {"hit_ratio", s.hit_ratio},
                             {"latency_ms_mean", s.latency_ms_mean},
                             {"latency_ms_p50", s.latency_ms_p50},
                             {"latency_ms_p99", s.latency_ms_p99},
                             {"load_wait_ms_mean", s.load_wait_ms_mean},
                             {"duration_s", s.duration_s},
                             {"lag_ms_max", s.lag_ms_max},
                             {"hits", s.hits},
                             {"latency_ms_max", s.latency_ms_max},
                             {"load_wait_ms_p99", s.load_wait_ms_p99},
                             {"in_flight_max", s.in_flight_max},
                             {"speed", a.speed},
                             {"address", a.address}};
  std::printf("%s\n", out.dump().c_str());
}

int run_replay(const replay_args& a) {
  const std::string name = "replay";
  auto requests = eval::read_trace(a.trace);
  if (!requests) return report(name, requests.error(), exit_failure);
  if (requests->empty())
    return report(name, make_error(errc::invalid_argument, a.trace + " holds no requests"),
                  exit_failure);
  auto models = models_of(*requests);

  std::optional<eval::catalog> catalog;
  if (!a.catalog.empty()) {
    auto c = eval::read_catalog(a.catalog);
    if (!c) return report(name, c.error(), exit_failure);
    if (auto ok = check_against_catalog(*requests, *c, a); !ok)
      return report(name, ok.error(), exit_failure);
    catalog = std::move(*c);
  }
  width_map widths;
  if (!a.repo.empty()) {
    auto w = widths_from_repository(a.repo, models);
    if (!w) return report(name, w.error(), exit_failure);
    widths = std::move(*w);
  }

  ctl::connect_options where;
  where.address = a.address;
  where.token_file = a.token_file;
  auto client = replay_client::connect(where);
  if (!client) return report(name, client.error(), exit_failure);
  if (catalog)
    if (auto ok = (*client)->register_models(*catalog); !ok)
      return report(name, ok.error(), exit_failure);
  if (auto ok = (*client)->check_registered(models); !ok)
    return report(name, ok.error(), exit_failure);
  if (a.repo.empty()) {
    for (const auto& m : models) {
      auto w = (*client)->probe_width(m);
      if (!w) return report(name, w.error(), exit_failure);
      widths[m] = *w;
    }
  }

  replay_settings settings;
  settings.speed = a.speed;
  settings.request_timeout_s = a.timeout_s;
  settings.seed = a.seed;
  auto records = (*client)->replay(*requests, widths, settings);
  if (!records) return report(name, records.error(), exit_failure);
  if (!a.out.empty())
    if (auto ok = write_records(a.out, *records); !ok)
      return report(name, ok.error(), exit_failure);
  auto summary = summarize(*records);
  if (a.json)
    print_json(summary, a);
  else
    print_human(summary, a);
  return exit_ok;
}

}  // namespace

void add_replay_command(CLI::App& app, int& rc) {
  auto a = std::make_shared<replay_args>();
  auto* cmd = app.add_subcommand(
      "replay", "Play a trace against a live warmd, open loop, and measure latency");
  cmd->add_option("--connect", a->address, "warmd's address: unix:PATH or HOST:PORT")->required();
  cmd->add_option("--trace", a->trace, "Trace CSV (time_ms,model_id)")->required();
  cmd->add_option("--speed", a->speed, "Replay X times faster than the trace's timestamps")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  cmd->add_option(
      "--register", a->catalog,
      "Register every model of this catalog first (id = path = model_id; see `warm-eval models`)");
  cmd->add_option(
      "--repo", a->repo,
      "The daemon's repository root on this machine: read input widths from the model files");
  cmd->add_option("--out", a->out,
                  "Per-request CSV (sent_ms,model_id,latency_ms,hit,load_wait_ms,status)");
  cmd->add_flag("--json", a->json, "Print the summary as one JSON line");
  cmd->add_option("--token-file", a->token_file,
                  "Token for a remote TCP listener (see docs/configuration.md)");
  cmd->add_option("--timeout", a->timeout_s,
                  "Seconds before a request is abandoned (counted as an error)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  cmd->add_option("--seed", a->seed, "Seed of the random inputs")->capture_default_str();
  cmd->callback([a, &rc] { rc = run_replay(*a); });
}

}  // namespace warm::eval_cli
