#!/usr/bin/env python3
"""Numbers for scripts/bench-quick.sh: parse wrk, summarise trials, write JSON.

The shell script runs the processes; this file owns every calculation, so the
arithmetic is in one readable place. Standard library only.

Flow:
  1. `meta`   records machine and software identity before the first trial.
  2. `sample` turns one trial (wrk's stdout plus CPU tick counters that the
     shell read from /proc) into one JSON line, appended to a samples file.
  3. `report` groups samples by case and server, prints the table of medians
     and ratios, and writes meta + summary + every raw sample to one JSON file.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys

# wrk prints times with these units (wrk's units.c: time_units_us, and
# format_time_s for the run length).
TIME_UNITS_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}
# wrk prints sizes in binary multiples labelled "KB", "MB", ... (units.c:
# binary_units).
SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}

SCHEMA = "servery-bench-quick/1"


def parse_time_us(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text)
    if not m:
        raise ValueError(f"unrecognised wrk time {text!r}")
    return float(m.group(1)) * TIME_UNITS_US[m.group(2)]


def parse_size_bytes(text):
    m = re.fullmatch(r"([0-9.]+)([KMGTP]?)B", text)
    if not m:
        raise ValueError(f"unrecognised wrk size {text!r}")
    return float(m.group(1)) * SIZE_UNITS[m.group(2)]


def parse_wrk(text):
    """The numbers in wrk 4's text report (run with --latency)."""
    out = {"latency_us": {}, "socket_errors": {}, "non_2xx_3xx": 0}
    m = re.search(r"^\s*(\d+) requests in (\S+), (\S+) read\s*$", text, re.M)
    if not m:
        raise ValueError("wrk output has no 'N requests in T, S read' line")
    out["requests"] = int(m.group(1))
    out["duration_s"] = parse_time_us(m.group(2)) / 1e6
    out["bytes_read"] = parse_size_bytes(m.group(3))
    m = re.search(r"^Requests/sec:\s*([0-9.]+)\s*$", text, re.M)
    if not m:
        raise ValueError("wrk output has no 'Requests/sec:' line")
    out["rps"] = float(m.group(1))
    m = re.search(r"^Transfer/sec:\s*(\S+)\s*$", text, re.M)
    out["transfer_bytes_per_s"] = parse_size_bytes(m.group(1)) if m else None
    for pct, value in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)\s*$", text, re.M):
        out["latency_us"][pct] = parse_time_us(value)
    m = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    )
    if m:
        out["socket_errors"] = dict(
            zip(("connect", "read", "write", "timeout"), map(int, m.groups()))
        )
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        out["non_2xx_3xx"] = int(m.group(1))
    return out


def run_text(argv):
    """stdout+stderr of a command, or None if it cannot run."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (p.stdout + p.stderr).strip()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def cmd_meta(args):
    repo = args.repo
    commit = run_text(["git", "-C", repo, "rev-parse", "HEAD"])
    if commit is None or not re.fullmatch(r"[0-9a-f]{40}", commit):
        commit = None
    status = run_text(["git", "-C", repo, "status", "--porcelain"])
    servery = None
    if args.servery_bin:
        servery = {
            "path": os.path.relpath(args.servery_bin, repo),
            "sha256": sha256_file(args.servery_bin),
        }
    nginx_version = None
    if args.nginx_bin:
        v = run_text([args.nginx_bin, "-v"]) or ""
        nginx_version = v.removeprefix("nginx version: ") or None
    wrk_first = (run_text([args.wrk_bin, "-v"]) or "").splitlines()
    meta = {
        "schema": SCHEMA,
        "started_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "command": args.command,
        "machine": {
            "hostname": platform.node(),
            "kernel": platform.release(),
            "cpu_model": cpu_model(),
            "nproc": args.nproc,
            "clk_tck": args.clk_tck,
        },
        "software": {
            "git_commit": commit,
            # None when git could not say (no repository).
            "git_dirty": None if status is None else bool(status),
            "servery": servery,
            "nginx_version": nginx_version,
            # "wrk 4.1.0 [epoll] Copyright (C) 2012 Will Glozer" -> up to "]".
            "wrk_version": wrk_first[0].split(" Copyright")[0] if wrk_first else None,
        },
        "options": json.loads(args.options),
    }
    json.dump(meta, sys.stdout, indent=2)
    print()


def cmd_sample(args):
    with open(args.wrk_out) as f:
        wrk_text = f.read()
    wrk = parse_wrk(wrk_text)
    config_text = None
    if args.config_file:
        with open(args.config_file) as f:
            config_text = f.read()
    tck = args.clk_tck
    cpu_s = (args.server_ticks_after - args.server_ticks_before) / tck
    client_cpu_s = args.client_ticks / tck
    wall_s = args.wall_s
    requests = wrk["requests"]
    sample = {
        "case": args.case,
        "metric": args.metric,
        "size_bytes": args.size,
        "connections": args.connections,
        "server": args.server,
        "trial": args.trial,
        "server_ready_line": args.ready_line,
        # The peer's generated config (nginx.conf), so the run can be redone.
        "server_config": config_text,
        "server_pids_before": args.pids_before,
        "server_pids_after": args.pids_after,
        "server_exit_status": args.exit_status,
        "wall_s": wall_s,
        "server_cpu_ticks": [args.server_ticks_before, args.server_ticks_after],
        "server_cpu_s": cpu_s,
        "server_cpu_util": cpu_s / wall_s if wall_s > 0 else None,
        "client_cpu_s": client_cpu_s,
        "client_cpu_util": client_cpu_s / wall_s if wall_s > 0 else None,
        "rps": wrk["rps"],
        "requests": requests,
        "duration_s": wrk["duration_s"],
        "bytes_read": wrk["bytes_read"],
        "p99_us": wrk["latency_us"].get("99"),
        "latency_us": wrk["latency_us"],
        "cpu_us_per_request": cpu_s * 1e6 / requests if requests else None,
        # Decimal units: 1 MB = 1e6 bytes, 1 GB = 1e9 bytes.
        "mb_per_s": wrk["bytes_read"] / wrk["duration_s"] / 1e6
        if wrk["duration_s"]
        else None,
        "cpu_s_per_gb": cpu_s / (wrk["bytes_read"] / 1e9) if wrk["bytes_read"] else None,
        "socket_errors": wrk["socket_errors"],
        "non_2xx_3xx": wrk["non_2xx_3xx"],
        "wrk_stdout": wrk_text,
    }
    print(json.dumps(sample))


# Per metric kind: the columns of the table as (label, sample key, format).
# The first column is the throughput measure, the third the cost measure;
# the ratio line divides servery's median by nginx's for both.
COLUMNS = {
    "rps": [
        ("req/s", "rps", "{:,.0f}"),
        ("p99 µs", "p99_us", "{:,.0f}"),
        ("CPU µs/req", "cpu_us_per_request", "{:.2f}"),
    ],
    "throughput": [
        ("MB/s", "mb_per_s", "{:,.0f}"),
        ("p99 µs", "p99_us", "{:,.0f}"),
        ("CPU s/GB", "cpu_s_per_gb", "{:.3f}"),
    ],
}
# wrk at or above this share of its CPU means the client may be the limit.
CLIENT_BOUND_UTIL = 0.95


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values):
    """(max - min) / median: how far apart the trials are."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid else None


def fmt(value, pattern):
    return "-" if value is None else pattern.format(value)


def summarise(samples):
    """One summary per (case, server) and one ratio entry per case."""
    cases = []
    for s in samples:
        if s["case"] not in cases:
            cases.append(s["case"])
    summaries, ratios = [], []
    for case in cases:
        rows = [s for s in samples if s["case"] == case]
        metric = rows[0]["metric"]
        servers = []
        for s in rows:
            if s["server"] not in servers:
                servers.append(s["server"])
        by_server = {}
        for server in servers:
            trials = [s for s in rows if s["server"] == server]
            summary = {
                "case": case,
                "metric": metric,
                "size_bytes": trials[0]["size_bytes"],
                "connections": trials[0]["connections"],
                "server": server,
                "trials": len(trials),
            }
            for _, key, _ in COLUMNS[metric]:
                summary[f"median_{key}"] = median(t[key] for t in trials)
                summary[f"spread_{key}"] = spread([t[key] for t in trials])
            summary["median_server_cpu_util"] = median(t["server_cpu_util"] for t in trials)
            summary["median_client_cpu_util"] = median(t["client_cpu_util"] for t in trials)
            summary["errors"] = sum(
                sum(t["socket_errors"].values()) + t["non_2xx_3xx"] for t in trials
            )
            summaries.append(summary)
            by_server[server] = summary
        if "servery" in by_server and "nginx" in by_server:
            a, b = by_server["servery"], by_server["nginx"]
            ratio = {"case": case, "metric": metric}
            for label, key, _ in (COLUMNS[metric][0], COLUMNS[metric][2]):
                x, y = a[f"median_{key}"], b[f"median_{key}"]
                ratio[f"{key}_ratio"] = x / y if x is not None and y else None
            ratios.append(ratio)
    return summaries, ratios


def print_table(meta, summaries, ratios, out):
    opts = meta["options"]
    w = out.write
    w(
        f"bench-quick: {opts['trials']} trial(s) x {opts['duration_s']} s per server, "
        f"warm-up {opts['warmup_s']} s, server cpu {opts['server_cpu']}, "
        f"wrk -t1 on cpu {opts['client_cpu']}\n"
    )
    m = meta["machine"]
    sw = meta["software"]
    commit = (sw["git_commit"] or "none")[:12]
    dirty = " (dirty tree)" if sw["git_dirty"] else ""
    w(f"machine: {m['cpu_model']}, {m['nproc']} cpus, kernel {m['kernel']}\n")
    w(f"software: commit {commit}{dirty}, {sw['nginx_version'] or 'no nginx'}, "
      f"{sw['wrk_version'] or 'wrk'}\n")
    client_bound = False
    for case in dict.fromkeys(s["case"] for s in summaries):
        rows = [s for s in summaries if s["case"] == case]
        cols = COLUMNS[rows[0]["metric"]]
        w(f"\ncase {case}: {rows[0]['size_bytes']} B file, "
          f"{rows[0]['connections']} connections (medians; ± is max-min spread)\n")
        header = f"  {'server':<9}"
        for label, _, _ in cols:
            header += f"{label:>14}{'±':>6}"
        header += f"{'srv CPU':>9}{'wrk CPU':>9}{'errors':>8}\n"
        w(header)
        for s in rows:
            line = f"  {s['server']:<9}"
            for _, key, pattern in cols:
                sp = s[f"spread_{key}"]
                line += f"{fmt(s[f'median_{key}'], pattern):>14}"
                line += f"{'-' if sp is None else f'{sp * 100:.0f}%':>6}"
            line += f"{fmt(s['median_server_cpu_util'], '{:.0%}'):>9}"
            line += f"{fmt(s['median_client_cpu_util'], '{:.0%}'):>9}"
            line += f"{s['errors']:>8}\n"
            w(line)
            util = s["median_client_cpu_util"]
            if util is not None and util >= CLIENT_BOUND_UTIL:
                client_bound = True
        for r in ratios:
            if r["case"] != case:
                continue
            (l1, k1, _), (l3, k3, _) = cols[0], cols[2]
            w(f"  servery/nginx: {l1} x{fmt(r[f'{k1}_ratio'], '{:.3f}')}, "
              f"{l3} x{fmt(r[f'{k3}_ratio'], '{:.3f}')}\n")
    if client_bound:
        w(f"\nnote: wrk used >= {CLIENT_BOUND_UTIL:.0%} of its CPU; throughput may be "
          "the client's limit, so compare the CPU-per-unit columns.\n")
    if any(s["errors"] for s in summaries):
        w("\nwarning: some trials had socket errors or non-2xx/3xx responses; "
          "see samples in the JSON.\n")


def cmd_report(args):
    with open(args.meta) as f:
        meta = json.load(f)
    samples = []
    with open(args.samples) as f:
        for line in f:
            if line.strip():
                samples.append(json.loads(line))
    summaries, ratios = summarise(samples)
    print_table(meta, summaries, ratios, sys.stdout)
    meta["finished_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"
    )
    result = dict(meta, summary=summaries, ratios=ratios, samples=samples)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(tmp, args.out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    m = sub.add_parser("meta", help="machine and software identity as JSON")
    m.add_argument("--repo", required=True)
    m.add_argument("--command", required=True)
    m.add_argument("--options", required=True, help="JSON object of the run's options")
    m.add_argument("--nproc", type=int, required=True)
    m.add_argument("--clk-tck", type=int, required=True)
    m.add_argument("--servery-bin")
    m.add_argument("--nginx-bin")
    m.add_argument("--wrk-bin", default="wrk")
    m.set_defaults(func=cmd_meta)

    s = sub.add_parser("sample", help="one trial as a JSON line")
    s.add_argument("--wrk-out", required=True)
    s.add_argument("--case", required=True)
    s.add_argument("--metric", choices=sorted(COLUMNS), required=True)
    s.add_argument("--size", type=int, required=True)
    s.add_argument("--connections", type=int, required=True)
    s.add_argument("--server", required=True)
    s.add_argument("--trial", type=int, required=True)
    s.add_argument("--clk-tck", type=int, required=True)
    s.add_argument("--server-ticks-before", type=int, required=True)
    s.add_argument("--server-ticks-after", type=int, required=True)
    s.add_argument("--client-ticks", type=int, required=True)
    s.add_argument("--wall-s", type=float, required=True)
    s.add_argument("--pids-before", type=int, required=True)
    s.add_argument("--pids-after", type=int, required=True)
    s.add_argument("--exit-status", type=int, required=True)
    s.add_argument("--ready-line", default="")
    s.add_argument("--config-file", help="server config to keep with the sample")
    s.set_defaults(func=cmd_sample)

    r = sub.add_parser("report", help="print the table and write the JSON")
    r.add_argument("--meta", required=True)
    r.add_argument("--samples", required=True)
    r.add_argument("--out", required=True)
    r.set_defaults(func=cmd_report)

    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
