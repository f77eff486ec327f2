#!/usr/bin/env python3
"""Summarizes the per-SASS-instruction CSV of `run.sh`'s ncu step (ncu --page source --print-source sass --csv).

For each profiled launch: the kernel's static SASS length, its warps (the executions of its first instruction, which
every warp runs once), the executed instructions a warp, the opcodes that take most of them, and the lines where the
sampled warps waited most. What it is for: a kernel of a few microseconds that issues thousands of instructions a warp
(the seventeenth session's delta rule: ~1800, most of them predicate spills of its row bounds checks) shows here at once.

Usage: ncu_summary.py ncu-sass.csv [--all] [--top N]
  --all    every launch (default: the first launch of each kernel name)
  --top N  opcodes and hot lines to list (default 10)
"""
import argparse
import collections
import csv
import sys

# the CSV's columns (by header name; ncu's order has changed between versions)
SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
SOURCE = "Source"


def launches(path):
    """Yields (kernel name, [row dicts]) per launch in the file."""
    name, header, rows = None, None, []
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if not r:
                continue
            if r[0] == "Kernel Name":
                if name is not None and rows:
                    yield name, rows
                name, header, rows = r[1], None, []
            elif r[0] == "Address":
                header = r
            elif header is not None and r[0].startswith("0x"):
                rows.append(dict(zip(header, r)))
    if name is not None and rows:
        yield name, rows


def opcode(source):
    parts = source.split()
    if not parts:
        return "?"
    return parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]


def num(s):
    try:
        return int(s.replace(",", ""))
    except ValueError:
        return 0


def summarize(name, rows, top, out):
    executed = [num(r.get(EXECUTED, "0")) for r in rows]
    samples = [num(r.get(SAMPLES, "0")) for r in rows]
    warps = executed[0] if executed and executed[0] else 0
    total = sum(executed)
    per_warp = total / warps if warps else float("nan")
    out.write(f"{name}: {len(rows)} SASS instructions, {warps} warps, {total} executed ({per_warp:.0f} a warp), "
              f"{sum(samples)} stall samples\n")
    ops = collections.Counter()
    for r, e in zip(rows, executed):
        ops[opcode(r.get(SOURCE, ""))] += e
    shown = ", ".join(f"{op} {n / warps:.0f}" if warps else f"{op} {n}" for op, n in ops.most_common(top))
    out.write(f"  a warp's instructions by opcode: {shown}\n")
    all_samples = sum(samples)
    if all_samples:
        hot = sorted(range(len(rows)), key=lambda i: -samples[i])[:top]
        out.write("  where the sampled warps waited (share of samples, line, executions, instruction):\n")
        for i in sorted(hot):
            if samples[i] == 0:
                continue
            out.write(f"    {100.0 * samples[i] / all_samples:5.1f} %  {i:5d}  {executed[i]:8d}  {rows[i].get(SOURCE, '').strip()}\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args(argv)
    seen = set()
    for name, rows in launches(a.csv):
        if not a.all and name in seen:
            continue
        seen.add(name)
        summarize(name, rows, a.top, sys.stdout)
    if not seen:
        sys.exit(f"{a.csv}: no kernel's SASS rows found (is it ncu's --page source --print-source sass --csv output?)")


if __name__ == "__main__":
    main(sys.argv[1:])
