"""The worker-loop phase of bench/run: pgbench -S through pgwarden with one event loop and with
two (daemon.workers), the same config otherwise, restarted for each round so the two alternate.
Reports each variant's tps, latency and proxy CPU per transaction (every thread), and two loops
over one. On a 2-core machine that pgbench and PostgreSQL share, a second loop has no core of its
own; the CPU per transaction says what a larger host would get."""

import copy

import pgbench
import report

VARIANTS = ("one_loop", "two_loops")


def _config(env, binary, max_clients, workers):
    cfg = copy.deepcopy(env.pgwarden_config(binary, max_clients))
    cfg["daemon"]["workers"] = workers
    return cfg


def run(a, env, binary, max_clients, results, measured_run, log):
    runs = []
    clients = a.clients
    total = a.repeats * len(a.modes) * len(clients) * len(VARIANTS)
    log(f"worker loops 1 and 2: {total} pgbench runs of {a.duration} s, restarted per round")
    n = 0
    for rep in range(a.repeats):
        order = VARIANTS if rep % 2 == 0 else tuple(reversed(VARIANTS))
        for name in order:
            workers = 1 if name == "one_loop" else 2
            env.start_pgwarden(binary, max_clients, name=f"pgwarden-{workers}loop",
                               config=_config(env, binary, max_clients, workers))
            target = dict(port=env.pgw_port, user=env.targets()["pgwarden"]["user"],
                          password=env.targets()["pgwarden"]["password"])
            w = pgbench.run(target, "simple", min(8, max(clients)), 1, env.dir, latencies=False)
            if "error" in w:
                log(f"warm-up of {name} failed: {w['error']}")
            for mode in a.modes:
                for c in clients:
                    n += 1
                    r = measured_run(a, env, target, name, mode, c, env.pgw.pid, rep)
                    runs.append(r)
                    status = (f"tps {r['tps']:.0f} cpu {r.get('proxy_cpu_us_per_tx')} us/tx"
                              if "error" not in r else "ERROR " + r["error"][:200])
                    log(f"[{n}/{total}] {mode:8s} c={c:<3d} {name:9s} {status}")
            env.stop_pgwarden()
    cells = report.summarize_cells(runs, a.modes, clients, VARIANTS)
    for cell in cells:
        one, two = cell["targets"]["one_loop"], cell["targets"]["two_loops"]
        cell["ratios"] = {"two_over_one_tps": report._ratio(two["tps_median"], one["tps_median"])}
    results["workers"] = {
        "variants": {"one_loop": "daemon.workers: 1", "two_loops": "daemon.workers: 2"},
        "cells": cells,
        "runs": [{k: v for k, v in r.items() if k != "latencies_us"} for r in runs],
    }


def render(results):
    w = results.get("workers")
    if not w:
        return ""
    lines = ["", "worker loops (pgwarden only; cpu: proxy CPU us per transaction, every thread)",
             f"{'mode':8s} {'c':>3s} | {'1 loop tps':>10s} {'p50':>5s} {'cpu':>5s} | "
             f"{'2 loops tps':>11s} {'p50':>5s} {'cpu':>5s} | {'2/1':>5s}"]

    f = report._f
    for c in w["cells"]:
        one, two = c["targets"]["one_loop"], c["targets"]["two_loops"]
        lines.append(
            f"{c['mode']:8s} {c['clients']:>3d} | {f(one['tps_median']):>10s} "
            f"{f(one['latency_median_us']):>5s} {f(one.get('proxy_cpu_us_per_tx'), '{:.1f}'):>5s} | "
            f"{f(two['tps_median']):>11s} {f(two['latency_median_us']):>5s} "
            f"{f(two.get('proxy_cpu_us_per_tx'), '{:.1f}'):>5s} | "
            f"{f(c['ratios']['two_over_one_tps'], '{:.2f}'):>5s}")
    return "\n".join(lines)
