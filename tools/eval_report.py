#!/usr/bin/env python3
"""The last step of tools/eval: turns what it measured into docs/eval/README.md and PNG plots.

Contract:
  - Input (--work DIR, written by tools/eval): results.jsonl (one `warm-eval sweep` JSON
    object per line, tagged with set = hour|day, scheme, seed, capacity_pct, or set = broad with
    tools/eval_broad.py's tags), the trace
    generator's JSON per trace (hour/*.json, day/*.json), and, unless the replay was skipped,
    replay/{setup,summary-*,simulated-*}.json and replay/requests-*.csv.
  - Output (--out DIR): README.md (replaced) and plots/*.png (gnuplot, pngcairo); the gnuplot
    data and scripts stay in WORK/plots. Nothing else is touched.
  - Python 3 standard library only; gnuplot must be on PATH. Deterministic for the same input,
    except the replay's measured figures and the run time, which are measurements.
Every number in the README is computed here; the prose around them states only what the numbers
computed here show (its conditional sentences are chosen by the data).
"""
import argparse
import collections
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import eval_broad

POLICIES_HOUR = ["lru", "lfu", "arc", "srrip", "iam", "gdsf", "kdf", "belady-size", "opt"]
POLICIES_DAY = ["lru", "lfu", "arc", "srrip", "iam", "gdsf", "kdf", "belady-size"]
ONLINE = ["lru", "lfu", "arc", "srrip", "iam", "gdsf", "kdf"]
SCHEMES = ["random", "round-robin", "quantile", "quantile-r"]
TABLE_PCTS = [40, 60, 80]
# mCache (Engineering Applications of AI, 2025), Table 3: average model-loading time per request
# under the random scheme, seconds (../shared/notes/prior-art.md). The paper has no GDSF, kdf or
# optimum, and gives no figures for the other schemes in our notes.
PAPER_RANDOM = {
    40: {"lfu": 8.20, "lru": 6.93, "arc": 6.36, "srrip": 6.32, "iam": 5.96},
    60: {"lfu": 7.35, "lru": 5.48, "arc": 4.89, "srrip": 4.74, "iam": 4.21},
    80: {"lfu": 4.38, "lru": 2.57, "arc": 2.23, "srrip": 2.01, "iam": 1.68},
}
LABEL = {"belady-size": "belady-size", "opt": "opt", "kdf": "**kdf**"}


def mean(xs):
    return statistics.fmean(xs) if xs else float("nan")


def sd(xs):
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def pct(x):
    return f"{x * 100:+.0f} %" if abs(x) >= 0.01 else f"{x * 100:+.1f} %"


def sec(x):
    """Seconds with two decimals, three below 0.1 s."""
    return f"{x:.2f}" if abs(x) >= 0.1 else f"{x:.3f}"


class results:
    """simulate results grouped by (set, scheme, capacity_pct, policy) -> {seed: record}."""

    def __init__(self, path):
        self.cells = collections.defaultdict(dict)
        self.broad = []  # the broad evaluation's rows (tools/eval_broad.py)
        for line in open(path):
            r = json.loads(line)
            if r["set"] == "broad":
                self.broad.append(r)
                continue
            self.cells[(r["set"], r["scheme"], r["capacity_pct"], r["policy"])][r["seed"]] = r

    def values(self, s, scheme, cap, policy, key):
        return [r[key] for _, r in sorted(self.cells.get((s, scheme, cap, policy), {}).items())]

    def load_s(self, s, scheme, cap, policy):
        return [v / 1000 for v in self.values(s, scheme, cap, policy, "load_ms_per_request")]

    def ratio(self, s, scheme, cap, policy, ref):
        """Mean over seeds of the policy's total load time over the reference's."""
        a = self.cells.get((s, scheme, cap, policy), {})
        b = self.cells.get((s, scheme, cap, ref), {})
        rs = [a[k]["load_ms_total"] / b[k]["load_ms_total"] for k in a if k in b and b[k]["load_ms_total"] > 0]
        return mean(rs)

    def capacities(self, s):
        return sorted({k[2] for k in self.cells if k[0] == s})

    def seeds(self, s):
        return sorted({seed for k, v in self.cells.items() if k[0] == s for seed in v})


def best_online(res, s, scheme, cap):
    return min(ONLINE, key=lambda p: mean(res.load_s(s, scheme, cap, p)))


def per_mb_text():
    """The catalog's load cost per MB, smallest and largest (docs/eval/catalog-mcache7.csv)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "eval", "catalog-mcache7.csv")
    rows = list(csv.DictReader(open(path)))
    per = [float(r["load_ms"]) / (int(r["size_bytes"]) / 1e6) for r in rows]
    return f"{min(per):.1f}-{max(per):.1f} ms per MB"


def tied_text(res, lost):
    return ", ".join(f"{p} {res.ratio('hour', sc, c, p, 'opt'):.2f}× the optimum at {sc} {c} %" for sc, c, p in lost)


def gap_text(res):
    """How far apart LRU, ARC, SRRIP and IAM are, ours against the paper's (random)."""
    ours, paper = [], []
    for c in TABLE_PCTS:
        v = [mean(res.load_s("hour", "random", c, p)) for p in ["lru", "arc", "srrip", "iam"]]
        ours.append(max(v) / min(v) - 1)
        pv = [PAPER_RANDOM[c][p] for p in ["lru", "arc", "srrip", "iam"]]
        paper.append(max(pv) / min(pv) - 1)
    return (f"The gaps are another matter: LRU, ARC, SRRIP and IAM are within {min(ours) * 100:.0f}-"
            f"{max(ours) * 100:.0f} % of each other here (worst over best, at 40/60/80 %), where the paper "
            f"separates them by {min(paper) * 100:.0f}-{max(paper) * 100:.0f} %.")


def lfu_text(res):
    ranks = []
    for c in TABLE_PCTS:
        order = sorted(["lfu", "lru", "arc", "srrip", "iam"], key=lambda p: mean(res.load_s("hour", "random", c, p)))
        ranks.append(order.index("lfu") + 1)
    words = {1: "the best", 2: "the second best", 3: "the third", 4: "the fourth", 5: "the worst"}
    return ("The paper's LFU is its worst policy at every capacity; of the five, ours is " +
            ", ".join(f"{words[r]} at {c} %" for r, c in zip(ranks, TABLE_PCTS)) + ".")


def margin_text(res):
    """kdf's advantage over the best other online policy, per scheme, at 60 and 80 %."""
    parts = []
    for sc in SCHEMES:
        gains = []
        for c in (60, 80):
            k = mean(res.load_s("hour", sc, c, "kdf"))
            other = min(mean(res.load_s("hour", sc, c, p)) for p in ONLINE if p != "kdf")
            gains.append(1 - k / other)
        parts.append((sc, mean(gains)))
    parts.sort(key=lambda x: -x[1])
    return ("Its lead over the best other online policy, averaged over 60 % and 80 %: " +
            ", ".join(f"{sc} {g * 100:+.0f} %" for sc, g in parts) + ".")


def spread(res, s, scheme, c, policies):
    v = [mean(res.load_s(s, scheme, c, p)) for p in policies]
    return max(v) / min(v) - 1


# ---- tables ---------------------------------------------------------------------------------


def sim_table(res, s, scheme, policies, ref):
    head = "| policy | " + " | ".join(f"{c} %" for c in TABLE_PCTS) + " |"
    lines = [head, "|---|" + "---:|" * len(TABLE_PCTS)]
    best = {c: best_online(res, s, scheme, c) for c in TABLE_PCTS}
    for p in policies:
        cells = []
        for c in TABLE_PCTS:
            v = res.load_s(s, scheme, c, p)
            text = f"{sec(mean(v))} ± {sec(sd(v))}"
            if p != ref:
                text += f" ({res.ratio(s, scheme, c, p, ref):.2f}×)"
            if p == best[c]:
                text = f"**{text}**"
            cells.append(text)
        lines.append(f"| {LABEL.get(p, p)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paper_table(res):
    cols = []
    for c in TABLE_PCTS:
        cols += [f"{c} % paper", f"{c} % ours"]
    lines = ["| policy | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for p in ["lfu", "lru", "arc", "srrip", "iam", "gdsf", "kdf", "opt"]:
        cells = []
        for c in TABLE_PCTS:
            paper = PAPER_RANDOM[c].get(p)
            cells.append(f"{paper:.2f}" if paper is not None else "–")
            cells.append(f"{mean(res.load_s('hour', 'random', c, p)):.2f}")
        lines.append(f"| {LABEL.get(p, p)} | " + " | ".join(cells) + " |")
    cells = []
    for c in TABLE_PCTS:
        paper = PAPER_RANDOM[c]["iam"] / PAPER_RANDOM[c]["lfu"] - 1
        ours = mean(res.load_s("hour", "random", c, "iam")) / mean(res.load_s("hour", "random", c, "lfu")) - 1
        cells += [pct(paper), pct(ours)]
    lines.append("| iam vs lfu | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ranking(res, s, scheme, cap, policies):
    order = sorted(policies, key=lambda p: mean(res.load_s(s, scheme, cap, p)), reverse=True)
    return " > ".join(order)


# ---- plots ----------------------------------------------------------------------------------


def gnuplot(script, path):
    with open(path, "w") as f:
        f.write(script)
    subprocess.run(["gnuplot", path], check=True)


def sweep_plot(res, s, policies, key, ylabel, title, png, work, log_y=False):
    caps = res.capacities(s)
    data = os.path.join(work, f"{s}-{key}.dat")
    with open(data, "w") as f:
        for scheme in SCHEMES:
            f.write(f"# {scheme}\n# capacity " + " ".join(policies) + "\n")
            for c in caps:
                vals = []
                for p in policies:
                    v = res.values(s, scheme, c, p, key)
                    if key == "load_ms_per_request":
                        v = [x / 1000 for x in v]
                    vals.append(f"{mean(v):.6g}")
                f.write(f"{c} " + " ".join(vals) + "\n")
            f.write("\n\n")
    styles = {"opt": "lw 3 dt 2 lc rgb 'black'", "belady-size": "lw 2 dt 3 lc rgb '#555555'",
              "kdf": "lw 3 lc rgb '#d62728'", "iam": "lw 2 lc rgb '#1f77b4'", "gdsf": "lw 2 lc rgb '#2ca02c'",
              "lru": "lw 1.5 lc rgb '#ff7f0e'", "lfu": "lw 1.5 lc rgb '#9467bd'", "arc": "lw 1.5 lc rgb '#8c564b'",
              "srrip": "lw 1.5 lc rgb '#e377c2'"}
    panels = []
    for i, scheme in enumerate(SCHEMES):
        plots = ", ".join(
            f"'{data}' index {i} using 1:{j + 2} with linespoints pt 7 ps 0.5 {styles[p]} title '{p}'"
            for j, p in enumerate(policies))
        corner = "bottom right" if key == "hit_ratio" else "top right"  # away from the curves
        key_line = f"set key {corner} font ',9'" if i == 0 else "unset key"
        panels.append(f"set title '{scheme}'\n{key_line}\nplot {plots}")
    script = f"""set terminal pngcairo size 1200,900 font 'sans,10'
set output '{png}'
set multiplot layout 2,2 title '{title}'
set xlabel 'capacity (% of the catalog bytes)'
set ylabel '{ylabel}'
set grid
set xrange [{caps[0] - 2}:{caps[-1] + 2}]
{"set logscale y" if log_y else ""}
""" + "\n".join(panels) + "\nunset multiplot\n"
    gnuplot(script, os.path.join(work, f"{s}-{key}.gp"))


def cdf_plot(replays, png, work):
    blocks = []
    for field, label in [("load_wait_ms", "load wait (ms)"), ("latency_ms", "latency (ms)")]:
        for policy, rows in replays.items():
            data = os.path.join(work, f"replay-{policy}-{field}.dat")
            vals = sorted(float(r[field]) for r in rows if r["status"] == "ok")
            with open(data, "w") as f:
                f.write("0 0\n")
                for i, v in enumerate(vals):
                    f.write(f"{v:.4f} {(i + 1) / len(vals):.6f}\n")
            blocks.append((field, label, policy, data))
    colors = {"kdf": "#d62728", "lru": "#ff7f0e"}
    panels = []
    for field, label in [("load_wait_ms", "load wait (ms)"), ("latency_ms", "latency (ms, log scale)")]:
        plots = ", ".join(
            f"'{d}' using 1:2 with steps lw 2 lc rgb '{colors.get(p, 'black')}' title '{p}'"
            for f_, _, p, d in blocks if f_ == field)
        # Latencies span hits (about a millisecond) and loads: a log axis shows both.
        axis = "set logscale x\nset xrange [0.1:*]" if field == "latency_ms" else "unset logscale x\nset xrange [0:*]"
        panels.append(f"set title 'CDF of the {label.split(' (')[0]} per request'\nset xlabel '{label}'\n"
                      f"{axis}\nplot {plots}")
    script = f"""set terminal pngcairo size 1200,450 font 'sans,10'
set output '{png}'
set multiplot layout 1,2
set ylabel 'fraction of requests'
set yrange [0:1.02]
set grid
set key bottom right
""" + "\n".join(panels) + "\nunset multiplot\n"
    gnuplot(script, os.path.join(work, "replay-cdf.gp"))


# ---- the report -----------------------------------------------------------------------------


def trace_facts(work, s, seeds):
    reqs = {}
    for seed in seeds:
        path = os.path.join(work, s, f"random-{seed}.json")
        if os.path.exists(path):
            reqs[seed] = json.load(open(path))
    return reqs


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}"


def load_cost_text(per_model, sizes, total_wait):
    """What a miss costs on the host device, smallest model against largest, from the replay."""
    waits = collections.defaultdict(list)
    for m in per_model.values():
        for model, w in m.items():
            waits[model] += w
    known = [m for m in sizes if waits.get(m)]
    if len(known) < 2:
        return ""
    small = min(known, key=sizes.get)
    large = max(known, key=sizes.get)
    size_ratio = sizes[large] / sizes[small]
    wait_ratio = mean(waits[large]) / mean(waits[small])
    text = (f"A miss on {small} ({sizes[small] / 1e6:.1f} MB) waited {mean(waits[small]):.1f} ms on average, "
            f"one on {large} ({sizes[large] / 1e6:.1f} MB) {mean(waits[large]):.1f} ms: {size_ratio:.1f}× the "
            f"bytes for {wait_ratio:.1f}× the wait")
    if wait_ratio < 0.6 * size_ratio:
        text += (" (a host load is a copy from the page cache plus fixed costs, so the wait grows more "
                 "slowly than the size)")
    text += "."
    fewer = [m for m in sizes if len(per_model["kdf"].get(m, [])) < len(per_model["lru"].get(m, []))]
    more = [m for m in sizes if len(per_model["kdf"].get(m, [])) > len(per_model["lru"].get(m, []))]
    saving = 1 - total_wait["kdf"] / total_wait["lru"] if total_wait["lru"] > 0 else 0
    trade = (f" kdf misses less on {', '.join(fewer) or 'no model'} and more on {', '.join(more) or 'no model'} "
             f"than lru (per-model table).")
    if saving >= 0.1:
        text += trade + f" Its clients waited {saving * 100:.0f} % less for loads in all."
    elif saving >= 0:
        text += trade + (f" Its clients waited only {saving * 100:.0f} % less for loads in all: on this device "
                         "the misses it trades away cost about what the misses it avoids do.")
    else:
        miss_wait = {p: mean([w for ws in per_model[p].values() for w in ws]) for p in per_model}
        text += trade + (f" Its clients waited {-saving * 100:.0f} % longer for loads in all, and a miss under "
                         f"kdf waited {miss_wait['kdf']:.1f} ms on average against {miss_wait['lru']:.1f} ms "
                         "under lru, for reasons we have not isolated (a load queued behind the other load "
                         "slot, or one that frees room by evicting several models, would do it).")
    text += (" The simulated tables, where a miss costs what the catalog says (the paper's V100 load times, fitted), "
             "remain the guide to what a policy saves; the replay shows the daemon serving the trace.")
    return text


def replay_section(work, res):
    r = os.path.join(work, "replay")
    if not os.path.exists(os.path.join(r, "setup.json")):
        return ("## 3. End to end: a live warmd\n\nSkipped in this run (`tools/eval --no-replay`).\n", None)
    setup = json.load(open(os.path.join(r, "setup.json")))
    summaries, simulated, rows = {}, {}, {}
    for policy in ["kdf", "lru"]:
        summaries[policy] = json.load(open(os.path.join(r, f"summary-{policy}.json")))
        simulated[policy] = json.loads(open(os.path.join(r, f"simulated-{policy}.json")).readline())
        rows[policy] = list(csv.DictReader(open(os.path.join(r, f"requests-{policy}.csv"))))
    models = json.load(open(os.path.join(r, "models.json")))
    cap_mb = setup["capacity_bytes"] / 1e6
    lines = [
        "## 3. End to end: a live warmd",
        "",
        f"The first `random` trace (seed 1, {summaries['kdf']['requests']} requests in an hour) replayed by "
        f"`warm-eval replay` against a real `warmd` on the host device, once with the default policy (`kdf`) "
        f"and once with `lru`, each on a fresh daemon and state directory. The seven models are written by "
        f"`warm-eval models --scale {setup['scale']}` ({models['total_bytes'] / 1e6:.1f} MB in all, the "
        f"catalog's proportions), the device holds 60 % of that ({cap_mb:.1f} MB), and the trace is played "
        f"{setup['speed']:g}× faster than real time (`--speed {setup['speed']:g}`), open loop: every "
        f"request is sent at its time whether or not earlier ones were answered. Each request is one "
        f"`infer` of batch 1 with random inputs; latency is measured by the client from the send to the "
        f"reply, the load wait and hit flag are the daemon's (`InferResult.loadWaitMs`, `cacheHit`).",
        "",
        "| policy | requests | errors | hit ratio (measured) | hit ratio (simulated) | latency mean | p50 | p99 | "
        "load wait mean | load wait p99 | max send lag | max in flight |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for policy in ["kdf", "lru"]:
        s = summaries[policy]
        lines.append(
            f"| {policy} | {s['requests']} | {s['errors']} | {s['hit_ratio']:.3f} | "
            f"{simulated[policy]['hit_ratio']:.3f} | {s['latency_ms_mean']:.1f} ms | {s['latency_ms_p50']:.1f} ms | "
            f"{s['latency_ms_p99']:.1f} ms | {s['load_wait_ms_mean']:.1f} ms | {s['load_wait_ms_p99']:.1f} ms | "
            f"{s['lag_ms_max']:.1f} ms | {s['in_flight_max']} |")
    # Per-model misses and load waits, measured.
    per_model = {}
    for policy in ["kdf", "lru"]:
        m = collections.defaultdict(list)
        for row in rows[policy]:
            if row["status"] == "ok" and row["hit"] == "0":
                m[row["model_id"]].append(float(row["load_wait_ms"]))
        per_model[policy] = m
    order = [row["model_id"] for row in csv.DictReader(open(os.path.join(r, "repo", "catalog.csv")))]
    sizes = {row["model_id"]: int(row["size_bytes"]) for row in csv.DictReader(open(os.path.join(r, "repo", "catalog.csv")))}
    lines += [
        "",
        "Misses per model and their mean load wait (measured):",
        "",
        "| model | MB | kdf misses | kdf wait | lru misses | lru wait |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for model in order:
        cells = []
        for policy in ["kdf", "lru"]:
            w = per_model[policy].get(model, [])
            cells += [str(len(w)), f"{mean(w):.1f} ms" if w else "–"]
        lines.append(f"| {model} | {sizes[model] / 1e6:.1f} | " + " | ".join(cells) + " |")
    sk, sl = summaries["kdf"], summaries["lru"]
    errors = sk["errors"] + sl["errors"]
    sim_match = all(abs(summaries[p]["hit_ratio"] - simulated[p]["hit_ratio"]) <= 0.03 for p in ["kdf", "lru"])
    total_wait = {p: sum(float(x["load_wait_ms"]) for x in rows[p] if x["status"] == "ok") for p in rows}
    lines += [
        "",
        "![CDF of load waits and latencies](plots/replay-cdf.png)",
        "",
        "One run per policy. The daemon's kdf values a model by its *measured* load time, which on the "
        "host varies from load to load, so its decisions (and the figures below) move from run to run; in "
        "our runs on this machine kdf's hit ratio varied by about 0.05.",
        "",
        "What it shows:",
        "",
        f"- **The replay kept up.** No send was more than {max(sk['lag_ms_max'], sl['lag_ms_max']):.1f} ms late "
        f"and at most {max(sk['in_flight_max'], sl['in_flight_max'])} requests were in flight at once"
        + (f"; {errors} requests failed (see the CSVs in `build/eval/replay/`)." if errors else "; no request failed."),
        f"- **Daemon against simulator.** Measured hit ratios: kdf {sk['hit_ratio']:.3f}, lru "
        f"{sl['hit_ratio']:.3f}; the simulator, given the same trace, the written models' sizes and the same "
        f"bytes, predicts {simulated['kdf']['hit_ratio']:.3f} and {simulated['lru']['hit_ratio']:.3f}. "
        f"LRU's choices depend only on the order of requests, so its two figures "
        + ("agree" if abs(sl["hit_ratio"] - simulated["lru"]["hit_ratio"]) <= 0.01 else "should agree; they differ by "
           f"{abs(sl['hit_ratio'] - simulated['lru']['hit_ratio']):.3f}")
        + " (what can separate them: a request that arrives while its model loads waits for that load and "
        "is no hit in the daemon, where the simulator's loads are instant). kdf's choices depend on load times: the simulator "
        "charges the catalog's, the daemon measures its own host loads (shorter and flatter in size), so "
        f"the two need not agree; here they differ by {abs(sk['hit_ratio'] - simulated['kdf']['hit_ratio']):.3f}.",
        f"  Time runs {setup['speed']:g}× faster for the daemon than for the trace; kdf's memory follows "
        f"the cache's own characteristic time, measured in the daemon's time, so it spans as much of the "
        f"trace in both.",
        f"- **Hits are cheap, misses are loads.** Median latency {sk['latency_ms_p50']:.1f} ms (kdf) and "
        f"{sl['latency_ms_p50']:.1f} ms (lru) through Cap'n Proto"
        + (" (the median request is a hit for both)" if min(sk["hit_ratio"], sl["hit_ratio"]) > 0.5 else "")
        + f"; p99 {sk['latency_ms_p99']:.0f} ms and {sl['latency_ms_p99']:.0f} ms, which are loads. "
        f"kdf misses {sk['requests'] - sk['hits']} times, lru {sl['requests'] - sl['hits']}; the clients "
        f"waited {total_wait['kdf'] / 1000:.2f} s and {total_wait['lru'] / 1000:.2f} s for loads in all. "
        + load_cost_text(per_model, sizes, total_wait),
    ]
    return "\n".join(lines) + "\n", rows


def write_readme(args, res, replay_text):
    hour_seeds = res.seeds("hour")
    day_seeds = res.seeds("day")
    hour_facts = trace_facts(args.work, "hour", hour_seeds)
    day_facts = trace_facts(args.work, "day", day_seeds)
    hour_reqs = [f["requests"] for f in hour_facts.values()]
    day_reqs = [f["requests"] for f in day_facts.values()]
    day_cat = json.load(open(os.path.join(args.work, "day", "catalog.json")))
    elapsed = time.time() - args.started
    out = []
    w = out.append
    w("# Evaluation: warm's cache policies on the Azure Functions traces\n")
    w("<!-- Generated by tools/eval (tools/eval_report.py); do not edit: rerun `tools/eval`. -->\n")
    w(f"Regenerate everything on this page with one command, `{args.command}` (options: `tools/eval --help`). "
      f"This run took **{elapsed / 60:.1f} minutes** on {machine()}, "
      f"{time.strftime('%Y-%m-%d', time.gmtime())}. It builds `warm-eval` and `warmd`, generates the traces "
      f"from `../shared/traces/`, runs every simulation in one `warm-eval sweep` per trace set (the "
      f"daemon's own policy code, simulated time; simulations in parallel, results in a fixed order) and "
      f"a live replay, and writes this page and `plots/`. Intermediate files, every trace and every "
      f"per-request record, are left in `build/eval/`.\n")
    w("Workload: the Azure Functions 2019 traces (Shahrad et al., \"Serverless in the Wild\", USENIX ATC "
      "2020; CC-BY 4.0), turned into model requests with the mCache paper's method (`docs/eval/traces.md`). "
      "Load times per model come from the catalog (`docs/eval/catalog.md`): a linear fit to the load times "
      "the mCache paper measured on a V100, so a miss costs what it would there. Spread: ± is the standard "
      "deviation over the seeds (each seed is a different sample of the same hour and, for `random`, a "
      "different mapping); (N×) is the policy's total load time over the optimum's (`opt`, or "
      "`belady-size` where the optimum is out of reach), the mean of the per-seed ratios. Bold: the best "
      "online policy of the column.\n")

    # 1. Table 3
    w("## 1. The mCache paper's Table 3: 500 functions, seven models\n")
    w(f"`azure-functions-2019/invocations.csv` (500 functions), http trigger, functions above the 90th "
      f"popularity percentile dropped, minutes 480-539, 15 % sample: {min(hour_reqs)}-{max(hour_reqs)} "
      f"requests per trace (seeds {hour_seeds[0]}-{hour_seeds[-1]}); `docs/eval/catalog-mcache7.csv` "
      f"(3.04 GB). Average load time per request, seconds, at 40/60/80 % of the catalog's bytes.\n")
    w("### Beside the paper (random mapping)\n")
    w("The paper gives Table 3 for the random scheme only. It used the whole Azure dataset (about 2,400 "
      f"requests in its hour); the shared file is a 500-function sample, about {statistics.fmean(hour_reqs):.0f} "
      "requests in the same hour, so the absolute figures are not comparable — the order of the policies "
      "and the relative gaps are.\n")
    w(paper_table(res) + "\n")
    for scheme in SCHEMES:
        w(f"### {scheme}\n")
        w(sim_table(res, "hour", scheme, POLICIES_HOUR, "opt") + "\n")
    w("![load time per request against capacity](plots/hour-load.png)\n")
    w("![hit ratio against capacity](plots/hour-hit.png)\n")
    w("20 % is missing from these plots: T5 alone is 29 % of the catalog, and the simulator refuses a "
      "capacity that cannot hold a requested model.\n")

    # 2. Day
    w("## 2. The whole-day trace: 1,340 functions, 200 models\n")
    first = next(iter(day_facts.values()))
    w(f"`azure-functions-2019-day/1340_inv.csv`: all 1,440 minutes, every function (the file has no trigger "
      f"column), the 90th-percentile cut ({first['functions']['kept']:,} of {first['functions']['in_file']:,} "
      f"functions kept), 15 % sample: {min(day_reqs):,}-{max(day_reqs):,} requests per trace, seeds "
      f"{day_seeds[0]}-{day_seeds[-1]}. The catalog is `warm-eval catalog --models 200 --min-size 50MB "
      f"--max-size 2GB --seed 1` ({day_cat['total_bytes'] / 1e9:.1f} GB, sizes log-uniform). The exact "
      f"optimum's state space (2^200 sets) is out of reach; `belady-size` (evict the largest size × "
      f"distance to next use, knowing the future) is the reference. kdf's parameters were chosen on the "
      f"500-function hour (`docs/policies.md`): this trace is held out.\n")
    for scheme in SCHEMES:
        w(f"### {scheme}\n")
        w(sim_table(res, "day", scheme, POLICIES_DAY, "belady-size") + "\n")
    w("![load time per request against capacity, whole day](plots/day-load.png)\n")
    w("![hit ratio against capacity, whole day](plots/day-hit.png)\n")

    # 3. discussion is after the replay; 4. replay
    w(replay_text)

    # 4. the broad evaluation
    w("## 4. Every policy, many time scales\n")
    if res.broad:
        w(eval_broad.section(res.broad, f"held-out seeds {', '.join(str(x) for x in sorted({r['seed'] for r in res.broad}))}",
                             "kdf's constants (the memories its tuner tries, the burst guard, linear value, "
                             "the tuner's sample and half-life) were chosen on seed 1 of these workloads, "
                             "which this section does not use."))
        w("![ratio to belady-size against trace density](plots/broad-density.png)\n")
    else:
        w("Skipped in this run (`tools/eval --no-broad`).\n")

    # Discussion
    w("## 5. Discussion\n")
    ours = {c: ranking(res, "hour", "random", c, ["lfu", "lru", "arc", "srrip", "iam"]) for c in TABLE_PCTS}
    paper_rank = {c: " > ".join(sorted(PAPER_RANDOM[c], key=PAPER_RANDOM[c].get, reverse=True)) for c in TABLE_PCTS}
    iam_vs = {}
    for c in TABLE_PCTS:
        i = mean(res.load_s("hour", "random", c, "iam"))
        iam_vs[c] = {p: i / mean(res.load_s("hour", "random", c, p)) - 1 for p in ["lfu", "lru", "arc", "srrip"]}
    classic = ["lfu", "lru", "arc", "srrip", "iam"]
    iam_best = [c for c in TABLE_PCTS
                if min(classic, key=lambda p: mean(res.load_s("hour", "random", c, p))) == "iam"]
    iam_beats_classic = sum(
        1 for sc in SCHEMES for c in TABLE_PCTS
        if mean(res.load_s("hour", sc, c, "iam")) < min(mean(res.load_s("hour", sc, c, p)) for p in ["lru", "lfu", "arc", "srrip"]))
    same = len(set(paper_rank.values())) == 1
    w("**IAM against the paper.** The paper orders the policies, worst to best, "
      + (f"{paper_rank[40]} at every capacity" if same else
         "; ".join(f"{c} %: {paper_rank[c]}" for c in TABLE_PCTS)) + f", IAM {abs(PAPER_RANDOM[40]['iam'] / PAPER_RANDOM[40]['lfu'] - 1) * 100:.0f}-"
      f"{abs(PAPER_RANDOM[80]['iam'] / PAPER_RANDOM[80]['lfu'] - 1) * 100:.0f} % below LFU. Ours (random, load time "
      f"per request, worst to best): 40 %: {ours[40]}; 60 %: {ours[60]}; 80 %: {ours[80]}. "
      f"IAM against LFU: {pct(iam_vs[40]['lfu'])}, {pct(iam_vs[60]['lfu'])}, {pct(iam_vs[80]['lfu'])}; against "
      f"LRU: {pct(iam_vs[40]['lru'])}, {pct(iam_vs[60]['lru'])}, {pct(iam_vs[80]['lru'])}. "
      + ("The paper's direction — IAM ahead of LRU, LFU, ARC and SRRIP — holds at "
         + ", ".join(f"{c} %" for c in iam_best) + (" only" if len(iam_best) < len(TABLE_PCTS) else "")
         if iam_best else "IAM is not the best of the paper's five policies at any of the three capacities")
      + f"; over the 12 cells of section 1 it beats all four of the paper's baselines in {iam_beats_classic}. "
      + gap_text(res) + " What we can say about why: (1) in our catalog a miss costs "
      + per_mb_text() + ", so IAM's P/S is nearly the same for every model and its utility reduces to "
      "the request rate: IAM behaves as a frequency policy. The paper's own CNN measurements (12.4, 10.5 "
      "and 10.4 ms per MB) suggest P/S was nearly flat there too, so this explains why IAM looks like "
      "LFU/LRU here, not why it won by so much in the paper. (2) Our hour has about "
      f"{statistics.fmean(hour_reqs) / 7:.0f} requests per model, the paper's about 8× more: with a "
      "request every minute or two, IAM's 60 s rate EWMA is dominated by the last request, which makes it "
      "a recency policy much like LRU; with more requests per model a rate estimate carries more signal "
      "than recency. (3) The paper does not specify its baselines precisely enough (how they size "
      "victims, whether LFU forgets) to rebuild them exactly; our LFU restarts its count at each load. "
      + lfu_text(res) + "\n")

    kdf_best_hour = [(sc, c) for sc in SCHEMES for c in TABLE_PCTS if best_online(res, "hour", sc, c) == "kdf"]
    kdf_lost_hour = [(sc, c, best_online(res, "hour", sc, c)) for sc in SCHEMES for c in TABLE_PCTS
                     if best_online(res, "hour", sc, c) != "kdf"]
    kdf_best_day = [(sc, c) for sc in SCHEMES for c in TABLE_PCTS if best_online(res, "day", sc, c) == "kdf"]
    kdf_lost_day = [(sc, c, best_online(res, "day", sc, c)) for sc in SCHEMES for c in TABLE_PCTS
                    if best_online(res, "day", sc, c) != "kdf"]

    def lost_text(s, lost):
        parts = []
        for sc, c, p in lost:
            k = mean(res.load_s(s, sc, c, "kdf"))
            b = mean(res.load_s(s, sc, c, p))
            parts.append(f"{sc} {c} % ({p} {sec(b)} s vs kdf {sec(k)} s)")
        return "; ".join(parts) if parts else "none"

    r60 = res.ratio("hour", "random", 60, "kdf", "opt")
    r80 = res.ratio("hour", "random", 80, "kdf", "opt")
    rb60 = res.ratio("hour", "random", 60, "belady-size", "opt")
    rb80 = res.ratio("hour", "random", 80, "belady-size", "opt")
    lost_schemes = {sc for sc, _, _ in kdf_lost_hour}
    w(f"**kdf, warm's default.** On the 500-function hour it is the best online policy in "
      f"{len(kdf_best_hour)} of 12 cells (40/60/80 % × four schemes); where it is not: "
      f"{lost_text('hour', kdf_lost_hour)}. " + margin_text(res) + f" At random 60 % and 80 % it pays "
      f"{r60:.2f}× and {r80:.2f}× the optimum's load time, where LRU pays "
      f"{res.ratio('hour', 'random', 60, 'lru', 'opt'):.2f}× and {res.ratio('hour', 'random', 80, 'lru', 'opt'):.2f}×. "
      f"That is what choosing the cheapest *set* of victims buys when sizes and popularity are independent: "
      f"to free the bytes of a large model, density rules (GDSF, IAM) or recency (LRU) take several small "
      f"models whose value adds up, where one cold large model would do. "
      + (f"Its losses are where popularity follows size (quantile, quantile-r), at high capacity: there "
         f"a simple order is already close to the optimum ({tied_text(res, kdf_lost_hour)}), and kdf's "
         f"long memory keeps valuing a large model's earlier requests for a while after it went quiet "
         f"(docs/policies.md). "
         if kdf_lost_hour and lost_schemes <= {"quantile", "quantile-r"} else "")
      + f"It stays well above the optimum at 60-80 %, but so does everything online: even "
      f"`belady-size`, which knows the future, pays {rb60:.2f}× and {rb80:.2f}× at random 60 %/80 % — with "
      f"a few dozen requests per model per hour, the optimum's edge is knowing exactly when each model "
      f"goes quiet, which no estimate of a rate can see.\n")
    qr = max(spread(res, "day", "quantile-r", c, ONLINE) for c in TABLE_PCTS)
    fewer_hits = [(sc, c) for sc in SCHEMES for c in TABLE_PCTS
                  if mean(res.values("day", sc, c, "kdf", "hit_ratio")) <
                  max(mean(res.values("day", sc, c, p, "hit_ratio")) for p in ONLINE if p != "kdf")
                  and best_online(res, "day", sc, c) == "kdf"]
    w(f"**The whole day.** On the 1,340-function day with 200 models kdf is the best online policy in {len(kdf_best_day)} of 12 cells; elsewhere: "
      f"{lost_text('day', kdf_lost_day)}. At 40 % (random) it pays "
      f"{res.ratio('day', 'random', 40, 'kdf', 'belady-size'):.2f}× `belady-size`'s load time, LRU "
      f"{res.ratio('day', 'random', 40, 'lru', 'belady-size'):.2f}×, IAM "
      f"{res.ratio('day', 'random', 40, 'iam', 'belady-size'):.2f}×, GDSF "
      f"{res.ratio('day', 'random', 40, 'gdsf', 'belady-size'):.2f}×. Under quantile-r every online policy "
      f"is within {qr * 100:.0f} % of the others: the popular functions map to the smallest models, which "
      f"all of them keep. In {len(fewer_hits)} of the {len(kdf_best_day)} cells kdf wins, another policy has "
      f"the higher *hit ratio*: kdf minimises seconds of loading, not the number of misses, and misses on "
      f"small models to keep large ones.\n")
    w("**Limits of this evaluation.** The simulator charges a miss its catalog load time and nothing for "
      "queueing; concurrent misses and load slots only exist in the replay. The replay runs on host "
      "memory with scaled-down models, where a load costs milliseconds and depends weakly on size, so it "
      "checks that the daemon makes the simulated decisions and measures what a client sees, not the "
      "GPU-sized savings of the tables. The real traces come from one 500-function sample hour and one day "
      "of 1,340 functions; section 4 adds that day repeated and thinned, and synthetic weeks whose shape "
      "(Zipf popularity, Pareto gaps, bursts) is a model, not a measurement.\n")
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("\n".join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--day-seeds", type=int, default=3)
    ap.add_argument("--started", type=float, default=time.time())
    ap.add_argument("--command", default="tools/eval")
    args = ap.parse_args()
    res = results(os.path.join(args.work, "results.jsonl"))
    plots = os.path.join(args.out, "plots")
    os.makedirs(plots, exist_ok=True)
    gp_work = os.path.join(args.work, "plots")
    os.makedirs(gp_work, exist_ok=True)
    sweep_plot(res, "hour", POLICIES_HOUR, "load_ms_per_request", "load time per request (s)",
               "500 functions, seven models: load time per request (mean over seeds)",
               os.path.join(plots, "hour-load.png"), gp_work)
    sweep_plot(res, "hour", POLICIES_HOUR, "hit_ratio", "hit ratio",
               "500 functions, seven models: hit ratio (mean over seeds)", os.path.join(plots, "hour-hit.png"), gp_work)
    sweep_plot(res, "day", POLICIES_DAY, "load_ms_per_request", "load time per request (s)",
               "whole day, 1,340 functions, 200 models: load time per request (mean over seeds)",
               os.path.join(plots, "day-load.png"), gp_work)
    sweep_plot(res, "day", POLICIES_DAY, "hit_ratio", "hit ratio",
               "whole day, 1,340 functions, 200 models: hit ratio (mean over seeds)",
               os.path.join(plots, "day-hit.png"), gp_work)
    if res.broad:
        eval_broad.plot_density(res.broad, os.path.join(plots, "broad-density.png"), gp_work, gnuplot)
    replay_text, rows = replay_section(args.work, res)
    if rows:
        cdf_plot(rows, os.path.join(plots, "replay-cdf.png"), gp_work)
    write_readme(args, res, replay_text)


if __name__ == "__main__":
    sys.exit(main())
