#!/usr/bin/env python3
"""Pools several compare_cleaner.py runs (issue 21's produce p99 while cleaning).

One run's window of cleaning is 1-4 s, so its p99 is the 20th-70th slowest record, and on a shared 2-core
machine one run's ratio moves by 2x from run to run. This reads the JSON of several runs and prints, per broker
and key count and per label (the part of the file name before the last "-<n>.json", or the file's directory):

  - every run's p99 without -> while cleaning and its ratio,
  - the median of the runs' ratios,
  - the pooled ratio: the p99 of every record of all the runs' cleaning windows over the p99 of every record of
    all their baselines (needs runs made with --save-samples).

Files may be gzipped (.json.gz).

  bench/e2e/pool_cleaner_runs.py bench/e2e/results/2026-12-05-cleaner-pooled/*.json.gz
"""
import argparse
import gzip
import json
import re
import statistics
from pathlib import Path


def p(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def label_of(path):
    m = re.match(r"(.*)-\d+\.json(\.gz)?$", path.name)
    return m.group(1) if m else path.parent.name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args()
    groups = {}
    for f in args.files:
        data = json.loads(gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_text())
        for broker, by_keys in data["results"].items():
            for keys, r in by_keys.items():
                if "p99_ratio" not in r:
                    continue
                groups.setdefault((label_of(f), broker, int(keys)), []).append((f.name, r))
    print("| label | broker | keys | runs | p99 without -> while cleaning (ms), ratio, per run | median ratio "
          "| pooled p99 without -> while (ms) | pooled ratio | pooled p50 without -> while (ms) |")
    print("|---|---|---:|---:|---|---:|---|---:|---|")
    for (label, broker, keys), runs in sorted(groups.items()):
        per_run = ", ".join(f"{r['baseline_latency']['p99_ms']:.2f} -> {r['cleaning_latency']['p99_ms']:.2f} "
                            f"({r['p99_ratio']:.2f})" for _, r in runs)
        median = statistics.median(r["p99_ratio"] for _, r in runs)
        base = [x for _, r in runs for x in r.get("baseline_samples_ms", [])]
        during = [lat for _, r in runs for _, lat in r.get("cleaning_samples", [])]
        if base and during:
            pooled = (f"{p(base, 0.99):.2f} -> {p(during, 0.99):.2f} ({len(base)} / {len(during)} records)",
                      f"{p(during, 0.99) / p(base, 0.99):.2f}",
                      f"{p(base, 0.5):.2f} -> {p(during, 0.5):.2f}")
        else:
            pooled = ("(no samples saved)", "", "")
        print(f"| {label} | {broker} | {keys:,} | {len(runs)} | {per_run} | {median:.2f} | {pooled[0]} | "
              f"{pooled[1]} | {pooled[2]} |")


if __name__ == "__main__":
    main()
