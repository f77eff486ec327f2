#!/usr/bin/env python3
"""Sums kernel_trace.c's records per kind of CUDA graph, and shows what the host did while the GPU waited.

A graph's replays are its kernels in start order, cut every `nodes` kernels (a graph's kernels run on one
stream, one after another). Graphs with the same node count and first/last kernel are one kind (a decode step
re-captured at another position is the same kind). For each kind: replays, the mean span of a replay (first
start to last end), the kernels' busy time in it (the sum of their durations: span - busy is what the launches
between them cost inside the graph), and its kernels by busy time, per replay; graph kinds replayed equally often
are summed as one step's (every kernel of a decode step). Then where the GPU waited on the
host: the idle time before each graph replay, kernel launched one by one or memory copy (its start minus the
latest end before it), summed by what came next; and, for the most frequent long wait (a decode step's
start), the driver calls the host made inside those waits (the rest of a wait is the host's own code).

Usage: kernel_trace.py TRACE.tsv [--top N]
"""
import argparse
import collections
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()

    by_graph = collections.defaultdict(list)
    eager = collections.Counter()
    eager_n = collections.Counter()
    eager_list = []
    driver = []         # (start, end, call) on the host
    units_extra = []    # memory copies: (start, end, label)
    with open(a.trace) as f:
        for line in f:
            tag, *fields = line.rstrip("\n").split("\t")
            if tag == "D":
                driver.append((int(fields[0]), int(fields[1]), fields[2]))
                continue
            if tag == "M":
                kind = COPY_KINDS.get(fields[3], "copy")
                units_extra.append((int(fields[0]), int(fields[1]), f"{kind} {human(int(fields[2]))}"))
                continue
            g, node, s, e, name = fields
            s, e = int(s), int(e)
            if g == "0":
                eager_list.append((s, e, "one by one: " + name))
                eager[name] += e - s
                eager_n[name] += 1
            else:
                by_graph[int(g)].append((s, e, int(node), name))

    kinds = {}
    units = []   # (start, end, label): every graph replay and every kernel launched one by one
    units.extend(eager_list)
    units.extend(units_extra)
    for g, ks in by_graph.items():
        ks.sort()
        nodes = len({k[2] for k in ks})
        for i in range(0, len(ks) - nodes + 1, nodes):
            rep = ks[i:i + nodes]
            key = (nodes, rep[0][3], rep[-1][3])
            kd = kinds.setdefault(key, {"spans": [], "busy": [], "names": collections.Counter(), "count": collections.Counter(), "graphs": set()})
            kd["spans"].append(rep[-1][1] - rep[0][0])
            kd["busy"].append(sum(k[1] - k[0] for k in rep))
            kd["graphs"].add(g)
            units.append((rep[0][0], rep[-1][1], f"graph {nodes}: {rep[0][3]} .. {rep[-1][3]}"))
            for s, e, _, name in rep:
                kd["names"][name] += e - s
                kd["count"][name] += 1

    print("| graph kind (nodes: first .. last kernel) | graphs | replays | span us (median) | busy us (median) | launch gaps |")
    print("|---|---|---|---|---|---|")
    order = sorted(kinds.items(), key=lambda kv: -sum(kv[1]["spans"]))
    for (nodes, first, last), kd in order:
        span = statistics.median(kd["spans"]) / 1e3
        busy = statistics.median(kd["busy"]) / 1e3
        print(f"| {nodes}: {first} .. {last} | {len(kd['graphs'])} | {len(kd['spans'])} | {span:.1f} | {busy:.1f} | {100 * (span - busy) / span:.0f} % |")
    for (nodes, first, last), kd in order:
        reps = len(kd["spans"])
        if reps < 2:
            continue
        print(f"\n{nodes} nodes ({first} .. {last}), {reps} replays, per replay:")
        for name, ns in kd["names"].most_common(a.top):
            print(f"  {name:36s} {kd['count'][name] / reps:6.1f} x {ns / kd['count'][name] / 1e3:7.2f} us = {ns / reps / 1e3:8.1f} us")
    steps(kinds, a.top)
    units.sort()
    idle = collections.defaultdict(list)
    gaps = collections.defaultdict(list)   # label -> [(wait start, wait end)]
    last_end = None
    for s, e, label in units:
        if last_end is not None:
            idle[label].append(max(0, s - last_end))
            if s > last_end:
                gaps[label].append((last_end, s))
        last_end = e if last_end is None else max(last_end, e)
    print("\nGPU idle before (what the GPU waited for, by what came next):")
    print("| next | times | median idle us | total idle ms |")
    print("|---|---|---|---|")
    for label, v in sorted(idle.items(), key=lambda kv: -sum(kv[1]))[:a.top]:
        print(f"| {label} | {len(v)} | {statistics.median(v) / 1e3:.1f} | {sum(v) / 1e6:.2f} |")
    host_in_waits(idle, gaps, driver)
    if eager:
        print("\nlaunched one by one (all of the run):")
        for name, ns in eager.most_common(a.top):
            print(f"  {name:36s} {eager_n[name]:7d} x {ns / eager_n[name] / 1e3:7.2f} us")


COPY_KINDS = {"1": "HtoD", "2": "DtoH", "8": "DtoD"}


def steps(kinds, top):
    """Graph kinds replayed equally often (32 times or more), two or more of them, batched (a gemv8 kernel in them)
    or not, taken as the graphs of one repeated step (bench's decode at batch 1, at batch 8): every kernel of the
    step summed, per step."""
    groups = collections.defaultdict(list)
    for key, kd in kinds.items():
        reps = len(kd["spans"])
        batched = any(n.startswith("gemv8") for n in kd["names"])
        if reps >= 32:
            groups[(reps, batched)].append(kd)
    for (reps, batched), kds in sorted(groups.items()):
        if len(kds) < 2:
            continue
        names, count = collections.Counter(), collections.Counter()
        for kd in kds:
            names.update(kd["names"])
            count.update(kd["count"])
        span = sum(statistics.median(kd["spans"]) for kd in kds) / 1e3
        busy = sum(names.values()) / reps / 1e3
        print(f"\na step of {len(kds)} graphs replayed {reps} times ({'batched' if batched else 'one row'}): "
              f"{sum(count.values()) / reps:.0f} kernels, {busy:.1f} us of kernels in {span:.1f} us of graph spans")
        for name, ns in names.most_common(top):
            print(f"  {name:36s} {count[name] / reps:6.1f} x {ns / count[name] / 1e3:7.2f} us = {ns / reps / 1e3:8.1f} us")


def human(n):
    return f"{n / 1024:.0f} KB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MB"


def host_in_waits(idle, gaps, driver):
    """The driver calls inside the waits before the label that waited most often (32 times at least, 20 us or more at
    the median: a decode step's start; loading's few long waits are the copies' own)."""
    often = {k: v for k, v in gaps.items() if len(v) >= 32 and statistics.median(e - s for s, e in v) >= 20_000}
    if not often or not driver:
        return
    label = max(often, key=lambda k: len(often[k]))
    waits = often[label]
    driver.sort()
    starts = [d[0] for d in driver]
    import bisect
    per_call = collections.Counter()
    per_call_n = collections.Counter()
    detail = []
    for ws, we in waits:
        i = bisect.bisect_left(starts, ws - 200_000)   # a call may have begun before the GPU went idle
        calls = []
        while i < len(driver) and driver[i][0] < we:
            s, e, name = driver[i]
            if e > ws:
                per_call[name] += min(e, we) - max(s, ws)
                per_call_n[name] += 1
                calls.append((s - ws, e - s, name))
            i += 1
        detail.append((we - ws, calls))
    n = len(waits)
    total = sum(we - ws for ws, we in waits)
    in_calls = sum(per_call.values())
    print(f"\nwhat the host did while the GPU waited before '{label}' ({n} waits, mean {total / n / 1e3:.1f} us):")
    print(f"  {'own code (outside driver calls)':44s} {(total - in_calls) / n / 1e3:8.1f} us a wait")
    for name, ns in per_call.most_common(8):
        print(f"  {name:44s} {ns / n / 1e3:8.1f} us a wait ({per_call_n[name] / n:.1f} calls)")
    detail.sort(key=lambda d: d[0])
    wait, calls = detail[len(detail) // 2]
    print(f"  the median wait ({wait / 1e3:.1f} us), call by call (start from the GPU going idle, duration, us):")
    shown = 0
    for k, (off, dur, name) in enumerate(calls):
        if k > 0 and name == calls[k - 1][2] and k + 1 < len(calls) and name == calls[k + 1][2]:
            continue   # runs of one call: first and last only
        print(f"    {off / 1e3:8.1f} {dur / 1e3:7.1f}  {name}")
        shown += 1
        if shown >= 40:
            break


if __name__ == "__main__":
    main()
