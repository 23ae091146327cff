// warm-bench: benchmarks that print JSON. See docs/benchmarks.md for results and how to rerun.
#include <CLI/CLI.hpp>

#include <iostream>

#include "benches.hpp"
#include "warm/backend.hpp"
#include "warm/model_writer.hpp"
#include "warm/units.hpp"

int main(int argc, char** argv) {
  CLI::App app{"warm-bench: warm's benchmarks (JSON on stdout)"};
  app.require_subcommand(1);
  // The benchmarks' TorchScript models are their own: loaded and run in this process.
  warm::code_policy code;
  code.in_process = true;
  warm::set_code_policy(code);
  int rc = 2;

  warm::bench::load_options load;
  std::string load_bytes = "1GiB";
  auto* load_cmd = app.add_subcommand("load", "Load a model onto the host device vs plain read()");
  load_cmd->add_option("--bytes", load_bytes, "Model size")->capture_default_str();
  load_cmd
      ->add_option("--backend", load.backend,
                   "dense, or torchscript (warm's load vs torch::jit::load)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dense", "torchscript"}));
  load_cmd->add_option("--dir", load.dir, "Directory for the model file (default: a temp dir)");
  load_cmd->add_option("--repeats", load.repeats, "Interleaved load/read pairs")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
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
  exec_cmd->add_option("--seconds", exec.seconds, "Duration")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  exec_cmd->add_option("--batch", exec.batch, "Batch size")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  exec_cmd->add_option("--device", exec.device, "host or cuda:N")->capture_default_str();
  exec_cmd->callback([&] {
    auto widths = warm::parse_widths(layers);
    if (!widths) {
      std::cerr << "warm-bench: " << widths.error().message << "\n";
      return;
    }
    exec.layers = *widths;
    rc = warm::bench::run_exec(exec);
  });

  warm::bench::coldstorm_options coldstorm;
  std::string coldstorm_layers = "2048,2048,2048";
  auto* coldstorm_cmd = app.add_subcommand(
      "coldstorm", "Concurrent requests at one cold model: one load, answers when it ends");
  coldstorm_cmd->add_option("--requests", coldstorm.requests, "Concurrent requests")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  coldstorm_cmd->add_option("--layers", coldstorm_layers, "Layer widths of the model")
      ->capture_default_str();
  coldstorm_cmd
      ->add_option("--kind", coldstorm.kind,
                   "Requests: ensure (ensureLoaded --sync) or infer (batch 1)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ensure", "infer"}));
  coldstorm_cmd
      ->add_option("--max-batch", coldstorm.max_batch, "Dynamic batching: rows per pass (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
  coldstorm_cmd
      ->add_option("--auto-batch", coldstorm.auto_batch,
                   "Automatic batching while --max-batch is 0: rows per pass (0: off; default: "
                   "the runtime's)")
      ->check(CLI::Range(0, 65536));
  coldstorm_cmd->callback([&] {
    auto widths = warm::parse_widths(coldstorm_layers);
    if (!widths) {
      std::cerr << "warm-bench: " << widths.error().message << "\n";
      return;
    }
    coldstorm.layers = *widths;
    rc = warm::bench::run_coldstorm(coldstorm);
  });

  warm::bench::batch_options batch;
  std::string batch_layers = "1024,1024,1024", batch_delay = "0us";
  auto* batch_cmd = app.add_subcommand(
      "batch", "Concurrent batch-1 clients of one model, with and without dynamic batching");
  batch_cmd->add_option("--layers", batch_layers, "Layer widths of the model")
      ->capture_default_str();
  batch_cmd->add_option("--clients", batch.clients, "Closed-loop client threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  batch_cmd->add_option("--seconds", batch.seconds, "Total timed seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  batch_cmd->add_option("--rounds", batch.rounds, "Rotated batched / unbatched rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  batch_cmd->add_option("--max-batch", batch.max_batch, "Rows per batched pass")
      ->capture_default_str()
      ->check(CLI::Range(2, 65536));
  batch_cmd
      ->add_option("--max-queue-delay", batch_delay,
                   "How long a pass may wait for more, e.g. 200us")
      ->capture_default_str();
  batch_cmd->add_option("--device", batch.device, "host or cuda:N")->capture_default_str();
  batch_cmd->callback([&] {
    auto widths = warm::parse_widths(batch_layers);
    auto delay = warm::parse_duration(batch_delay);
    if (!widths || !delay) {
      std::cerr << "warm-bench: " << (widths ? delay.error().message : widths.error().message)
                << "\n";
      return;
    }
    batch.layers = *widths;
    batch.max_queue_delay = std::chrono::duration_cast<std::chrono::microseconds>(*delay);
    rc = warm::bench::run_batch(batch);
  });

  warm::bench::hitpath_options hitpath;
  std::string hitpath_layers = "256,256";
  auto* hitpath_cmd =
      app.add_subcommand("hitpath", "runtime::infer on a loaded model vs device::infer directly");
  hitpath_cmd->add_option("--layers", hitpath_layers, "Layer widths (dense)")
      ->capture_default_str();
  hitpath_cmd
      ->add_option("--backend", hitpath.backend,
                   "dense, or torchscript (a small CNN made with python3-torch)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dense", "torchscript"}));
  hitpath_cmd->add_option("--seconds", hitpath.seconds, "Total duration")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  hitpath_cmd->add_option("--threads", hitpath.threads, "Client threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  hitpath_cmd->add_option("--rounds", hitpath.rounds, "Interleaved rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  hitpath_cmd->callback([&] {
    auto widths = warm::parse_widths(hitpath_layers);
    if (!widths) {
      std::cerr << "warm-bench: " << widths.error().message << "\n";
      return;
    }
    hitpath.layers = *widths;
    rc = warm::bench::run_hitpath(hitpath);
  });

  warm::bench::rpc_options rpc;
  std::string rpc_layers = "256,256";
  auto* rpc_cmd = app.add_subcommand(
      "rpc", "Inference over Cap'n Proto (unix socket) vs a bare Cap'n Proto echo server");
  rpc_cmd->add_option("--clients", rpc.clients, "Concurrent clients")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  rpc_cmd->add_option("--seconds", rpc.seconds, "Total duration")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  rpc_cmd->add_option("--layers", rpc_layers, "Layer widths")->capture_default_str();
  rpc_cmd->add_option("--rounds", rpc.rounds, "Interleaved rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  rpc_cmd->add_flag("--runtime", rpc.runtime,
                    "Against the model in a model runtime (warm-runtime) instead of the echo "
                    "server; the baseline is "
                    "the host device");
  rpc_cmd->add_option(
      "--runtime-command", rpc.runtime_command,
      "The runtime to start with --runtime (default: warm-runtime beside warm-bench)");
  rpc_cmd->callback([&] {
    auto widths = warm::parse_widths(rpc_layers);
    if (!widths) {
      std::cerr << "warm-bench: " << widths.error().message << "\n";
      return;
    }
    rpc.layers = *widths;
    rc = warm::bench::run_rpc(rpc);
  });

  warm::bench::hol_options hol;
  std::string hol_small = "256,256", hol_large = "4096,4096,4096";
  auto* hol_cmd = app.add_subcommand(
      "hol", "Head-of-line blocking: small-model p99 over RPC alone and beside large inferences");
  hol_cmd->add_option("--seconds", hol.seconds, "Total duration (half alone, half loaded)")
      ->capture_default_str()
      ->check(CLI::Range(0.2, 600.0));
  hol_cmd->add_option("--small", hol_small, "Layer widths of the small model")
      ->capture_default_str();
  hol_cmd->add_option("--large", hol_large, "Layer widths of the large model")
      ->capture_default_str();
  hol_cmd->add_option("--large-batch", hol.large_batch, "Batch of the large inferences")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  hol_cmd
      ->add_option("--inline-limit", hol.inline_limit,
                   "The runtime's inline_inference_limit (18446744073709551615: every hit inline)")
      ->capture_default_str();
  hol_cmd->callback([&] {
    auto small = warm::parse_widths(hol_small);
    auto large = warm::parse_widths(hol_large);
    if (!small || !large) {
      std::cerr << "warm-bench: " << (!small ? small : large).error().message << "\n";
      return;
    }
    hol.small_layers = *small;
    hol.large_layers = *large;
    rc = warm::bench::run_hol(hol);
  });

  warm::bench::http_options http;
  std::string http_layers = "256,256";
  auto* http_cmd = app.add_subcommand(
      "http",
      "KServe V2 inference over HTTP vs bare httplib servers, with and without the model work "
      "(docs/performance.md)");
  http_cmd->add_option("--connections", http.connections, "Concurrent keep-alive connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  http_cmd->add_option("--seconds", http.seconds, "Total duration")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  http_cmd->add_option("--layers", http_layers, "Layer widths")->capture_default_str();
  http_cmd->add_option("--rounds", http.rounds, "Interleaved rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  http_cmd->add_flag(
      "--binary", http.binary,
      "Binary tensor data (Inference-Header-Content-Length) instead of JSON numbers");
  http_cmd->callback([&] {
    auto widths = warm::parse_widths(http_layers);
    if (!widths) {
      std::cerr << "warm-bench: " << widths.error().message << "\n";
      return;
    }
    http.layers = *widths;
    rc = warm::bench::run_http(http);
  });

  warm::bench::evict_options evict;
  std::string evict_bytes = "2GiB";
  auto* evict_cmd = app.add_subcommand(
      "evict", "Status and inspect latency while large models are evicted in turn, vs idle");
  evict_cmd->add_option("--bytes", evict_bytes, "Size of each of the two large models")
      ->capture_default_str();
  evict_cmd->add_option("--evictions", evict.evictions, "Loads per evicting phase")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  evict_cmd->add_option("--rounds", evict.rounds, "Rotated evicting / idle rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  evict_cmd->callback([&] {
    auto bytes = warm::parse_bytes(evict_bytes);
    if (!bytes) {
      std::cerr << "warm-bench: " << bytes.error().message << "\n";
      return;
    }
    evict.bytes = *bytes;
    rc = warm::bench::run_evict(evict);
  });

  warm::bench::soak_options soak;
  auto* soak_cmd = app.add_subcommand(
      "soak", "Mixed RPC traffic with failing loads: lost calls, accounting drift, RSS growth");
  soak_cmd->add_option("--seconds", soak.seconds, "Traffic duration")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  soak_cmd->add_option("--clients", soak.clients, "Concurrent clients")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  soak_cmd->add_option("--models", soak.models, "Models in the repository")
      ->capture_default_str()
      ->check(CLI::Range(2, 100));
  soak_cmd->add_option("--failure-rate", soak.failure_rate, "Share of loads that fail")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  soak_cmd
      ->add_option("--allocation-failure-rate", soak.allocation_failure_rate,
                   "Share of device allocations that fail")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  soak_cmd->add_option("--seed", soak.seed, "Seed of the fault injector and the clients")
      ->capture_default_str();
  soak_cmd->callback([&] { rc = warm::bench::run_soak(soak); });

  warm::bench::registry_options registry;
  auto* registry_cmd = app.add_subcommand(
      "registry", "Register many models: throughput, memory per model, status latency");
  registry_cmd->add_option("--models", registry.models, "Models to register")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  registry_cmd->add_option("--queries", registry.queries, "status() calls timed")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000000));
  registry_cmd
      ->add_option("--touch", registry.touch, "Then load this many models (bytes per loaded model)")
      ->capture_default_str();
  registry_cmd->callback([&] { rc = warm::bench::run_registry(registry); });

  warm::bench::policy_bench_options policy;
  auto* policy_cmd = app.add_subcommand("policy", "Eviction decisions per second of every policy");
  policy_cmd->add_option("--resident", policy.resident, "Resident models")->capture_default_str();
  policy_cmd->add_option("--seconds", policy.seconds, "Duration per policy")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 600.0));
  policy_cmd
      ->add_option("--policy", policy.policies,
                   "Only these policies (repeatable; default: every policy)")
      ->delimiter(',');
  policy_cmd->callback([&] { rc = warm::bench::run_policy(policy); });

  warm::bench::rollout_options rollout;
  std::string rollout_layers = "1024,1024,1024";
  auto* rollout_cmd = app.add_subcommand(
      "rollout", "Clients of a served model while new versions roll in, vs steady");
  rollout_cmd->add_option("--layers", rollout_layers, "Layer widths of each version")
      ->capture_default_str();
  rollout_cmd->add_option("--clients", rollout.clients, "Closed-loop client threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  rollout_cmd->add_option("--rounds", rollout.rounds, "Steady windows and rolls")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  rollout_cmd->add_option("--steady-ms", rollout.steady_ms, "Each steady window")
      ->capture_default_str()
      ->check(CLI::Range(10, 600000));
  rollout_cmd->add_option("--poll-ms", rollout.poll_ms, "How often the directory is looked at")
      ->capture_default_str()
      ->check(CLI::Range(1, 60000));
  rollout_cmd
      ->add_option("--settle-ms", rollout.settle_ms,
                   "How long a new model file must stay unchanged")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  rollout_cmd
      ->add_option("--load-policy", rollout.load_policy,
                   "availability-preserving or resource-preserving")
      ->capture_default_str();
  rollout_cmd->callback([&] {
    auto widths = warm::parse_widths(rollout_layers);
    if (!widths) {
      std::cerr << "warm-bench: " << widths.error().message << "\n";
      return;
    }
    rollout.layers = *widths;
    rc = warm::bench::run_rollout(rollout);
  });

  warm::bench::cluster_options cluster;
  std::string cluster_layers = "256,256";
  auto* cluster_cmd = app.add_subcommand(
      "cluster",
      "etcd and warmd instances: forwarded vs local inference, cold placement, failover");
  cluster_cmd->add_option("--instances", cluster.instances, "warmd processes")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  cluster_cmd->add_option("--layers", cluster_layers, "Layer widths of every model")
      ->capture_default_str();
  cluster_cmd->add_option("--seconds", cluster.seconds, "Local / forwarded: total timed seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cluster_cmd->add_option("--clients", cluster.clients, "Closed-loop client threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cluster_cmd->add_option("--rounds", cluster.rounds, "Rotated local / forwarded rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cluster_cmd->add_option("--cold", cluster.cold, "Cold models requested at once")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  cluster_cmd->add_option("--lease-ttl", cluster.lease_ttl, "The instances' --lease-ttl")
      ->capture_default_str()
      ->check(CLI::Range(2, 300));
  cluster_cmd->add_option("--warmd", cluster.warmd,
                          "The warmd to run (default: beside warm-bench)");
  cluster_cmd->callback([&] {
    auto widths = warm::parse_widths(cluster_layers);
    if (!widths) {
      std::cerr << "warm-bench: " << widths.error().message << "\n";
      return;
    }
    cluster.layers = *widths;
    rc = warm::bench::run_cluster(cluster);
  });

  CLI11_PARSE(app, argc, argv);
  return rc;
}
