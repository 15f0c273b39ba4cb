#!/usr/bin/env python3
"""Times the history studio's pages and the reports on a large SQLite store
(docs/performance.md, "The history studio on a large store").

    bench/studio_timing.py --pgwarden build/daemon/pgwarden --records 10000000 [--store FILE]

Starts a throwaway PostgreSQL and a pgwarden once to have it create an empty store (the schema
bench/studio_store copies), makes the store with bench/studio_store unless --store names one
already made, then starts pgwarden on it with the studio on and times each page (the median of
--repeat requests, each on a new connection) and `pgwarden report KIND --since 24h`."""

import argparse
import pathlib
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import pgwtest  # noqa: E402

PAGES = ["/studio/", "/studio/?since=7d", "/studio/?agent=agent-7", "/studio/?code=READ_ONLY",
         "/studio/conversation?id=conv-999000", "/studio/retries", "/studio/repeats",
         "/studio/denials", "/studio/zeros", "/studio/retries?since=7d"]


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.monotonic()
        fn()
        times.append(time.monotonic() - t)
    return statistics.median(times), max(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pgwarden", required=True)
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--store", help="a store bench/studio_store already made")
    ap.add_argument("--workdir", default="/tmp/studio-perf")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    work = pathlib.Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    pg = pgwtest.PgCluster()
    pg.init()
    pg.start()
    try:
        store = pathlib.Path(a.store) if a.store else work / "history-big.db"
        if not a.store:
            d = pgwtest.Pgwarden(pathlib.Path(a.pgwarden), pg)
            d.config["history"] = {"store": "sqlite", "path": str(work / "schema.db")}
            d.write_config()
            d.start()
            d.stop()
            d.destroy()
            t = time.monotonic()
            subprocess.run([str(ROOT / "bench" / "studio_store"), str(store),
                            str(work / "schema.db"), str(a.records)], check=True)
            print(f"store of {a.records} records made in {time.monotonic() - t:.0f}s, "
                  f"{store.stat().st_size / 2**30:.2f} GiB", flush=True)
        d = pgwtest.Pgwarden(pathlib.Path(a.pgwarden), pg)
        d.config["history"] = {"store": "sqlite", "path": str(store)}
        d.config["metrics"]["studio"] = True
        d.write_config()
        d.start(timeout=120)
        try:
            base = f"http://127.0.0.1:{d.metrics_port}"
            print("| page | median | slowest | bytes |\n| --- | ---: | ---: | ---: |")
            for page in PAGES:
                size = 0

                def get():
                    nonlocal size
                    with urllib.request.urlopen(base + page, timeout=600) as r:
                        size = len(r.read())
                med, worst = timed(get, a.repeat)
                print(f"| `{page}` | {med:.2f} s | {worst:.2f} s | {size} |", flush=True)
            print("\n| report | median | slowest |\n| --- | ---: | ---: |")
            for kind in ("retries", "repeats", "denials", "zeros"):
                def run():
                    subprocess.run([a.pgwarden, "report", kind, "--store", f"sqlite:{store}",
                                    "--since", "24h"], check=True, capture_output=True)
                med, worst = timed(run, a.repeat)
                print(f"| `report {kind} --since 24h` | {med:.2f} s | {worst:.2f} s |", flush=True)

            def conv():
                subprocess.run([a.pgwarden, "report", "conversation", "conv-999000", "--store",
                                f"sqlite:{store}"], check=True, capture_output=True)
            med, worst = timed(conv, a.repeat)
            print(f"| `report conversation conv-999000` | {med:.2f} s | {worst:.2f} s |")
        finally:
            d.stop()
            d.destroy()
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
