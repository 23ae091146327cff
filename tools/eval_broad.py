#!/usr/bin/env python3
"""The broad evaluation of tools/eval: many workloads and time scales, every policy of the library.

Two uses:
  - `eval_broad.py cells --eval BIN --traces DIR --work DIR --seeds 2,3,4`: writes the catalogs and
    traces of every workload under --work (via `warm-eval catalog` and `warm-eval trace`) and a
    `warm-eval sweep` cells file, WORK/cells.jsonl, whose results are tagged set = "broad",
    family, workload, seed, capacity_pct and density (the workload's requests per model and day).
  - imported by tools/eval_report.py: section(rows, ...) turns those results into the report's
    section (tables, the default's worst cells, geometric means) and plot_density(...) into
    its plot of ratio against trace density.
Python 3 standard library only. The workloads (docs/eval/README.md lists them with the commands):
  - hour: the 500-function Azure hour, four mapping schemes, the seven-model catalog; 40/60/80 %;
    reference: the exact optimum `opt`.
  - day: the 1,340-function Azure day played three times (each day sampled anew), 200 models
    (log-uniform 50 MB-2 GB), schemes random / quantile / quantile-r, sampled at 100 %, 10 % and
    1 % of the invocations; 20/40/60 %; reference `belady-size`.
  - syn: seven-day synthetic traces (drifting Zipf(0.9) ranks, a daily cycle, bursts) with Pareto
    (shape 1.5) or Poisson gaps, dense (20 requests per model and day + 2,000) or sparse (2 + 20 in
    all per day: models hours to days apart), over seven catalogs: 10 models of one size, 12 and
    100 models in two classes 3x apart (random, popular-small, popular-large), 1,000 models as 5 %
    large bases (2 GB) among small adapters (50 MB), 1,000 log-uniform 50 MB-2 GB; 10/30/50 %
    (30/50/70 % for the small catalogs); reference `opt` up to 12 models, else `belady-size`.
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys

POLICIES = ["lru", "lfu", "arc", "srrip", "sieve", "s3fifo", "lhd", "lecar", "gdsf", "iam", "kdf",
            "kdf-adaptive"]
DEFAULT = "kdf"
DAY_SAMPLES = ["1", "0.1", "0.01"]
# name: (warm-eval catalog arguments, models)
CATALOGS = {
    "10-same": (["--models", "10", "--sizes", "uniform", "--min-size", "1GB", "--max-size", "1GB"], 10),
    "12-two-class": (["--models", "12", "--sizes", "two-class", "--min-size", "300MB", "--max-size", "900MB"], 12),
    "100-two-class": (["--models", "100", "--sizes", "two-class", "--min-size", "300MB", "--max-size", "900MB"], 100),
    "100-popular-small": (["--models", "100", "--sizes", "two-class", "--order", "ascending", "--min-size", "300MB",
                           "--max-size", "900MB"], 100),
    "100-popular-large": (["--models", "100", "--sizes", "two-class", "--order", "descending", "--min-size",
                           "300MB", "--max-size", "900MB"], 100),
    "1000-adapters": (["--models", "1000", "--sizes", "two-class", "--large-share", "0.05", "--min-size", "50MB",
                       "--max-size", "2GB"], 1000),
    "1000-log-uniform": (["--models", "1000", "--sizes", "log-uniform", "--min-size", "50MB", "--max-size", "2GB"],
                         1000),
}


def make_cells(args):
    os.makedirs(args.work, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    cells = []

    def run(*a):
        subprocess.run([args.eval, *a], check=True, stdout=subprocess.DEVNULL)

    def summary(*a):
        return json.loads(subprocess.run([args.eval, *a], check=True, capture_output=True, text=True).stdout)

    def add(trace, catalog, caps, family, workload, seed, reference, density):
        for c in caps:
            cells.append({"trace": trace, "catalog": catalog, "capacity": f"{c}%",
                          "policy": ",".join(POLICIES + [reference]),
                          "tag": {"set": "broad", "family": family, "workload": workload, "seed": seed,
                                  "capacity_pct": c, "density": density}})

    hour = os.path.join(args.traces, "azure-functions-2019", "invocations.csv")
    day = os.path.join(args.traces, "azure-functions-2019-day", "1340_inv.csv")
    cat7 = args.catalog7
    cat200 = os.path.join(args.work, "catalog-200.csv")
    run("catalog", "--models", "200", "--min-size", "50MB", "--max-size", "2GB", "--seed", "1", "--out", cat200)
    catalogs = {}
    for name, (flags, models) in CATALOGS.items():
        path = os.path.join(args.work, f"catalog-{name}.csv")
        run("catalog", *flags, "--out", path)
        catalogs[name] = (path, models)
    for seed in seeds:
        for scheme in ["random", "round-robin", "quantile", "quantile-r"]:
            t = os.path.join(args.work, f"hour-{scheme}-{seed}.csv")
            s = summary("trace", "--invocations", hour, "--catalog", cat7, "--scheme", scheme, "--seed", str(seed),
                        "--out", t)
            add(t, cat7, [40, 60, 80], "hour", scheme, seed, "opt", s["requests"] / 7 * 24)
        for scheme in ["random", "quantile", "quantile-r"]:
            for sample in DAY_SAMPLES:
                t = os.path.join(args.work, f"day-{scheme}-{sample}-{seed}.csv")
                s = summary("trace", "--invocations", day, "--catalog", cat200, "--trigger", "any", "--scheme", scheme,
                            "--seed", str(seed), "--minutes", "1440", "--sample", sample, "--days", "3", "--out", t)
                add(t, cat200, [20, 40, 60], "day", f"{scheme} @{float(sample) * 100:g}%", seed, "belady-size",
                    s["requests"] / 200 / 3)
        for name, (path, models) in catalogs.items():
            for density, per_day in [("dense", 20 * models + 2000), ("sparse", 2 * models + 20)]:
                for gaps, shape in [("pareto", "1.5"), ("poisson", "0")]:
                    t = os.path.join(args.work, f"syn-{name}-{density}-{gaps}-{seed}.csv")
                    s = summary("trace", "--synthetic", "--catalog", path, "--days", "7", "--per-day", str(per_day),
                                "--pareto", shape, "--seed", str(seed), "--out", t)
                    caps = [10, 30, 50] if models >= 100 else [30, 50, 70]
                    add(t, path, caps, "syn", f"{name} {density} {gaps}", seed, "opt" if models <= 12 else "belady-size",
                        s["requests"] / models / 7)
    with open(os.path.join(args.work, "cells.jsonl"), "w") as f:
        for c in cells:
            f.write(json.dumps(c) + "\n")
    print(len(cells))


# ---- the report -------------------------------------------------------------------------------

def ratios(rows):
    """{(family, workload, capacity): {policy: mean over seeds of load / reference load}}."""
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r["family"], r["workload"], r["capacity_pct"], r["seed"])][r["policy"]] = r["load_ms_total"]
    acc = collections.defaultdict(lambda: collections.defaultdict(list))
    for (family, workload, cap, seed), d in by.items():
        ref = d.get("opt", d.get("belady-size"))
        for p in POLICIES:
            if p in d:
                acc[(family, workload, cap)][p].append((d[p] + 1e-9) / (ref + 1e-9))
    return {k: {p: sum(v) / len(v) for p, v in d.items()} for k, d in acc.items()}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summary_rows(cells):
    out = []
    for p in POLICIES:
        vs = [d[p] for d in cells.values()]
        against_best = [d[p] / min(v for q, v in d.items() if q != p) for d in cells.values()]
        wins = sum(1 for d in cells.values() if d[p] == min(d.values()))
        out.append((p, geomean(vs), max(vs), geomean(against_best), max(against_best), wins))
    return out


def section(rows, seeds_text, tuned_text):
    """The report's broad-evaluation section (markdown) from the broad sweep's result rows."""
    cells = ratios(rows)
    lines = []
    w = lines.append
    families = {"hour": "Azure hour (500 functions, 7 models; vs `opt`)",
                "day": "Azure day x3 (1,340 functions, 200 models; vs `belady-size`)",
                "syn": "synthetic week (vs `opt` up to 12 models, else `belady-size`)"}
    w(f"Every policy of the library on {len(cells)} cells (workload x capacity), each the mean over "
      f"{seeds_text} of the policy's total load time over the reference's. {tuned_text}\n")
    w("### Summary\n")
    w("Geometric mean and worst of the ratios to the reference over all cells; the ratio to the best "
      "*other* policy of each cell (below 1: the policy is the best of the cell by that much); cells won.\n")
    w("| policy | geomean vs reference | worst vs reference | geomean vs best other | worst vs best other | cells won |")
    w("|---|---:|---:|---:|---:|---:|")
    rows_s = summary_rows(cells)
    best_geo = min(r[1] for r in rows_s)
    for p, g, worst, gb, wb, wins in sorted(rows_s, key=lambda r: r[1]):
        name = f"**{p}**" if p == DEFAULT else p
        gtxt = f"**{g:.3f}**" if g == best_geo else f"{g:.3f}"
        w(f"| {name} | {gtxt} | {worst:.2f} | {gb:.3f} | {wb:.2f} | {wins} |")
    hindsight = [min(d.values()) for d in cells.values()]
    w(f"| *best per cell, in hindsight* | {geomean(hindsight):.3f} | {max(hindsight):.2f} | 1.000 | 1.00 | |")
    w("")
    w("The last row picks, for each cell, the policy that did best there, knowing the results: no online "
      "choice among the library's policies can do better than its geometric mean.\n")
    default_vs = sorted(((d[DEFAULT] / min(v for q, v in d.items() if q != DEFAULT), k,
                         min((v, q) for q, v in d.items() if q != DEFAULT)) for k, d in cells.items()), reverse=True)
    over = sum(1 for x in default_vs if x[0] > 1.02)
    w(f"The default (`{DEFAULT}`) is within 1.02x of the best other policy in {len(cells) - over} of {len(cells)} "
      f"cells. Its worst cells:\n")
    w("| cell | capacity | default / best other | best other |")
    w("|---|---:|---:|---|")
    for ratio, (family, workload, cap), (v, q) in default_vs[:8]:
        w(f"| {family}: {workload} | {cap} % | {ratio:.2f} | {q} ({v:.2f}x the reference) |")
    w("")
    by_family = collections.defaultdict(list)
    for ratio, (family, _, _), _ in default_vs:
        by_family[family].append(ratio)
    w("By family, the default against the best other policy (geometric mean over the family's cells): " +
      "; ".join(f"{f} {geomean(v):.3f}" for f, v in sorted(by_family.items())) + ".\n")
    for family, title in families.items():
        keys = sorted(k for k in cells if k[0] == family)
        if not keys:
            continue
        w(f"### {title}\n")
        w("| workload | cap | " + " | ".join(POLICIES) + " |")
        w("|---|---:|" + "---:|" * len(POLICIES))
        for k in keys:
            d = cells[k]
            best = min(d.values())
            vals = [(f"**{d[p]:.2f}**" if d[p] == best else f"{d[p]:.2f}") for p in POLICIES]
            w(f"| {k[1]} | {k[2]} % | " + " | ".join(vals) + " |")
        w("")
    return "\n".join(lines) + "\n"


def plot_density(rows, png, work, gnuplot):
    """Ratio to belady-size against the day trace's density, geometric mean per policy."""
    day = collections.defaultdict(lambda: collections.defaultdict(list))
    for (family, workload, cap), d in ratios(rows).items():
        if family != "day":
            continue
        sample = float(workload.split("@")[1].rstrip("%"))
        for p, v in d.items():
            day[sample][p].append(v)
    if not day:
        return False
    data = os.path.join(work, "broad-density.dat")
    with open(data, "w") as f:
        f.write("# sample% " + " ".join(POLICIES) + "\n")
        for sample in sorted(day):
            f.write(f"{sample:g} " + " ".join(f"{geomean(day[sample][p]):.6g}" for p in POLICIES) + "\n")
    colors = ["#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f7f7f", "#000000",
              "#2ca02c", "#1f77b4", "#d62728", "#ff9896"]
    plots = ", ".join(
        f"'{data}' using 1:{i + 2} with linespoints pt {i % 12 + 1} ps 0.8 lw {3 if p == DEFAULT else 1.5} "
        f"lc rgb '{colors[i % len(colors)]}' title '{p}'"
        for i, p in enumerate(POLICIES))
    gnuplot(f"""set terminal pngcairo size 1000,650 font 'sans,10'
set output '{png}'
set title 'Azure day x3: load time over belady-size against the share of invocations sampled (geometric mean over schemes, capacities, seeds)'
set xlabel 'invocations sampled (%), log scale'
set ylabel 'ratio to belady-size'
set logscale x
set grid
set key outside right
plot {plots}
""", os.path.join(work, "broad-density.gp"))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cells")
    c.add_argument("--eval", required=True)
    c.add_argument("--traces", required=True)
    c.add_argument("--work", required=True)
    c.add_argument("--catalog7", required=True)
    c.add_argument("--seeds", default="2,3,4")
    args = ap.parse_args()
    make_cells(args)


if __name__ == "__main__":
    sys.exit(main())
