#!/usr/bin/env python3
"""The wait a shared lock adds per statement as worker loops are added: a discrete-event
simulation of N loops, each running statements back to back (CPU per statement `cpu_us`,
exponentially distributed around its mean) and entering each shared section once per statement
for its measured hold time (bench/contention_bench, one thread's CPU time per iteration).
A loop that finds a section held waits (the time is lost to that loop). Prints, per section and
N, the lock's utilisation, the mean wait per statement and the loop's throughput lost to it.

    bench/contention_model.py --cpu-us 27 --section recorder=1.2 --section ledger=0.45 \
        --section metrics=0.08 --handoff-us 0.15 --loops 1,2,4,8,12,16
"""
import argparse
import heapq
import random


def simulate(loops, cpu_us, sections, statements=200000, seed=7, handoff_us=0.0):
    """Each loop alternates: its own work (exp, mean cpu_us), then the sections in order.
    A section last held by another loop costs `handoff_us` more (its cache lines move cores).
    Returns {section: (utilisation, mean wait us)} and the statements per second overall."""
    rng = random.Random(seed)
    free_at = {name: 0.0 for name, _ in sections}
    busy = {name: 0.0 for name, _ in sections}
    waited = {name: 0.0 for name, _ in sections}
    last = {name: -1 for name, _ in sections}
    events = [(rng.expovariate(1.0 / cpu_us), i) for i in range(loops)]
    heapq.heapify(events)
    done = 0
    now = 0.0
    while done < statements:
        now, loop = heapq.heappop(events)
        t = now
        for name, hold in sections:
            start = max(t, free_at[name])
            waited[name] += start - t
            held = hold + (handoff_us if last[name] not in (-1, loop) else 0.0)
            last[name] = loop
            free_at[name] = start + held
            busy[name] += held
            t = start + held
        done += 1
        heapq.heappush(events, (t + rng.expovariate(1.0 / cpu_us), loop))
    return ({name: (busy[name] / now, waited[name] / done) for name, _ in sections},
            done / now * 1e6)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-us", type=float, required=True, help="a loop's CPU per statement outside the sections")
    ap.add_argument("--section", action="append", required=True, help="name=hold_us, in the order entered")
    ap.add_argument("--loops", default="1,2,4,8,12,16")
    ap.add_argument("--handoff-us", type=float, default=0.0,
                    help="extra hold time when the section's last holder was another loop")
    ap.add_argument("--statements", type=int, default=200000)
    args = ap.parse_args()
    sections = [(s.split("=")[0], float(s.split("=")[1])) for s in args.section]
    alone = 1e6 / (args.cpu_us + sum(h for _, h in sections))
    print("| loops | " + " | ".join(f"{n} util | {n} wait us" for n, _ in sections) +
          " | tx/s | per loop / uncontended |")
    print("| --- " * (2 + 2 * len(sections) + 1) + "|")
    for n in (int(x) for x in args.loops.split(",")):
        stats, tps = simulate(n, args.cpu_us, sections, args.statements, handoff_us=args.handoff_us)
        cells = " | ".join(f"{u:.2f} | {w:.2f}" for u, w in (stats[name] for name, _ in sections))
        print(f"| {n} | {cells} | {tps:,.0f} | {tps / n / alone:.2f} |")


if __name__ == "__main__":
    main()
