"""One pgbench -S run against one target, and what it measured: tps from pgbench's summary,
and the latency of every transaction from its per-transaction log (-l), from which the
median and p99 are computed here (pgbench itself only prints the mean)."""

import glob
import os
import re
import shutil
import subprocess
import tempfile

from benchenv import DATABASE, clean_env

_TPS = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")
_PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")
_FAILED = re.compile(r"number of failed transactions: (\d+)")


def percentile(sorted_values, q):
    """Nearest-rank percentile (q in 0..100) of an already sorted list."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil(n*q/100), at least 1
    return sorted_values[int(rank) - 1]


def median(values):
    s = sorted(v for v in values if v is not None)
    if not s:
        return None
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def run(target, mode, clients, seconds, workdir, transactions=None, latencies=True):
    """Runs `pgbench -n -S -M mode -c clients -T seconds -l` (or `-t transactions` per client
    when given) and returns a dict with tps, transactions, failed, and `latencies_us` (every
    transaction, when `latencies`), or `error`."""
    logdir = tempfile.mkdtemp(prefix="pgbench-log-", dir=workdir)
    prefix = os.path.join(logdir, "tx")
    threads = min(clients, 2)
    length = ["-t", str(transactions)] if transactions else ["-T", str(seconds)]
    logging = ["-l", f"--log-prefix={prefix}"] if latencies else []
    cmd = ["pgbench", "-n", "-S", "-M", mode, "-c", str(clients), "-j", str(threads),
           *length, *logging,
           "-h", "127.0.0.1", "-p", str(target["port"]), "-U", target["user"], DATABASE]
    result = {"mode": mode, "clients": clients, "seconds": seconds}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60,
                           env=clean_env(target["password"]), cwd=logdir)
        out = r.stdout + r.stderr
        tps, processed, failed = _TPS.search(out), _PROCESSED.search(out), _FAILED.search(out)
        if r.returncode != 0 or not (tps and processed):
            result["error"] = f"pgbench exited {r.returncode}: " + out.strip()[-600:]
            return result
        result["tps"] = float(tps.group(1))
        result["transactions"] = int(processed.group(1))
        result["failed"] = int(failed.group(1)) if failed else 0
        if not latencies:
            return result
        result["latencies_us"] = _read_latencies(prefix)
        if not result["latencies_us"]:
            result["error"] = "pgbench wrote no per-transaction log"
        return result
    except subprocess.TimeoutExpired:
        result["error"] = f"pgbench did not finish within {seconds + 60}s"
        return result
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


def _read_latencies(prefix):
    """pgbench's -l lines: client_id transaction_no time script_no time_epoch time_us, where
    `time` is the transaction's elapsed time in microseconds (one statement per -S
    transaction). Failed transactions have `failed`/`serialization` etc. in place of it."""
    out = []
    for path in glob.glob(prefix + ".*"):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[2].isdigit():
                    out.append(int(parts[2]))
    return out
