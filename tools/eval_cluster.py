#!/usr/bin/env python3
"""The cluster study of docs/cluster.md: warm's placement against a ModelMesh-style one.

Usage: tools/eval_cluster.py [--eval build/warm-eval] [--traces ../shared/traces]
                             [--work build/eval/cluster] [--seeds 2,3,4] [--instances 8,16,32,64]
                             [--capacity 25%] [--threads N]

Makes a catalog of 1,000 models (log-uniform 50 MB-2 GB, load time with size) and, per seed, four
traces over it: the whole-day Azure Functions trace (1,340 functions, every trigger) mapped at
random and popular-to-fast (quantile-r) and sampled at 100 %, the same at random sampled at 10 %,
and a synthetic week (drifting Zipf, daily cycle, Pareto gaps, bursts). Each runs through
`warm-eval simulate --instances N` for every N, with the cluster's total capacity split evenly,
kdf and lru under both placement rules. Writes every result to WORK/results.jsonl and prints the
summary tables of docs/cluster.md (means over the seeds). Seed 1 was used while building the
placement rule; the default seeds 2-4 were not.
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys

WORKLOADS = [
    # name, trace arguments (after --catalog), needs the day trace
    ("Azure day, random, 100 %", ["--trigger", "any", "--minutes", "1440", "--scheme", "random", "--sample", "1"], True),
    ("Azure day, quantile-r, 100 %", ["--trigger", "any", "--minutes", "1440", "--scheme", "quantile-r", "--sample", "1"],
     True),
    ("Azure day, random, 10 %", ["--trigger", "any", "--minutes", "1440", "--scheme", "random", "--sample", "0.1"], True),
    ("synthetic week", ["--synthetic", "--days", "7", "--per-day", "22000"], False),
]
CONFIGS = [("kdf", "warm"), ("kdf", "modelmesh"), ("lru", "warm"), ("lru", "modelmesh")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--eval", default=os.path.join(here, "..", "build", "warm-eval"))
    p.add_argument("--traces", default=os.path.join(here, "..", "..", "shared", "traces"))
    p.add_argument("--work", default=os.path.join(here, "..", "build", "eval", "cluster"))
    p.add_argument("--seeds", default="2,3,4")
    p.add_argument("--instances", default="8,16,32,64")
    p.add_argument("--capacity", default="25%")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    sizes = [int(n) for n in args.instances.split(",")]
    day = os.path.join(args.traces, "azure-functions-2019-day", "1340_inv.csv")
    if not os.path.exists(day):
        sys.exit(f"eval_cluster: no whole-day trace at {day} (pass --traces DIR)")
    os.makedirs(args.work, exist_ok=True)

    def run(*a):
        return subprocess.run([args.eval, *a], check=True, capture_output=True, text=True).stdout

    catalog = os.path.join(args.work, "catalog-1000.csv")
    run("catalog", "--models", "1000", "--sizes", "log-uniform", "--min-size", "50MB", "--max-size", "2GB",
        "--seed", "1", "--out", catalog)
    jobs = []
    for w, (name, flags, from_day) in enumerate(WORKLOADS):
        for seed in seeds:
            trace = os.path.join(args.work, f"w{w}-{seed}.csv")
            source = ["--invocations", day] if from_day else []
            run("trace", *source, "--catalog", catalog, *flags, "--seed", str(seed), "--out", trace)
            for n in sizes:
                jobs.append((name, seed, n, trace))

    def simulate(job):
        name, seed, n, trace = job
        out = run("simulate", "--trace", trace, "--catalog", catalog, "--capacity", args.capacity, "--instances",
                  str(n), "--policy", "kdf,lru", "--placement", "warm,modelmesh")
        rows = [json.loads(line) for line in out.splitlines()]
        for r in rows:
            r.update({"workload": name, "seed": seed})
        return rows

    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        results = [r for rows in pool.map(simulate, jobs) for r in rows]
    with open(os.path.join(args.work, "results.jsonl"), "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    report(results, sizes, seeds, args.capacity)


def report(results, sizes, seeds, capacity):
    def mean(workload, n, policy, placement, key):
        vals = [r[key] for r in results if r["workload"] == workload and r["instances"] == n and
                r["policy"] == policy and r["placement"] == placement]
        return statistics.mean(vals)

    print(f"Cluster capacity {capacity} of the catalog, split evenly; means over seeds "
          f"{','.join(map(str, seeds))}. Ratios are warm (kdf, warm placement) to ModelMesh-style "
          "(lru, modelmesh placement); below 1 is better.\n")
    for key, title, scale in [("cold_starts", "Cold starts", 1), ("load_ms_total", "Load time, hours", 3.6e6),
                              ("wait_ms_total", "Wait for loads, hours", 3.6e6)]:
        print(f"#### {title}\n")
        print("| workload | N | " + " | ".join(f"{p}+{pl}" for p, pl in CONFIGS) + " | warm / ModelMesh |")
        print("|---|---:|" + "---:|" * (len(CONFIGS) + 1))
        for name, _, _ in WORKLOADS:
            for n in sizes:
                vals = [mean(name, n, p, pl, key) / scale for p, pl in CONFIGS]
                fmt = "{:.0f}" if scale == 1 else "{:.1f}"
                ratio = vals[0] / vals[3] if vals[3] else float("nan")
                print(f"| {name} | {n} | " + " | ".join(fmt.format(v) for v in vals) + f" | **{ratio:.2f}** |")
        print()
    shares = [r["max_share"] for r in results if r["policy"] == "kdf" and r["placement"] == "warm"]
    print(f"Largest share of the loads one instance took (kdf, warm placement): max {max(shares):.3f}")


if __name__ == "__main__":
    main()
