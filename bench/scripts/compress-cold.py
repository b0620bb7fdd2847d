#!/usr/bin/env python3
"""The cold path of servery's on-the-fly compression, measured end to end.

For each coding (br, zstd, gzip) and each size (64 KiB: compressed by the worker for the first
request; 1 MiB: by the background compressor, identity meanwhile), a fresh one-worker servery
pinned to --server-cpu serves --trials distinct JavaScript files of that size. Each file is
asked for once cold and once warm over a kept-alive connection, and for each request we read:
  - the client's wall time (Python http.client, ~0.1 ms of its own included);
  - the server's CPU time around it: the sum of every thread's run time from
    /proc/PID/task/*/schedstat (nanoseconds, unlike stat's 10 ms ticks), split into the worker
    threads and the compressor thread (comm "servery-compr");
  - for a background file: how long until /metrics counts its variant, and the compressor's CPU.
With --levels, one more server per coding and level compresses the 64 KiB files inline, for
the size and cost of each level (what the defaults were chosen from).

usage: compress-cold.py --servery BIN [--trials N] [--server-cpu N] [--levels [--no-cold]]
                        [--codings br,zstd,gzip] [--json FILE]
Prints a table per part; writes every sample and the machine's identity to --json.
"""

import argparse
import hashlib
import http.client
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

KIB = 1024
SIZES = {"64k": 64 * KIB, "1m": 1024 * KIB}
CODINGS = ["br", "zstd", "gzip"]
LEVELS = {"br": [1, 3, 4, 5, 6, 9, 11], "zstd": [1, 3, 6, 9, 19], "gzip": [1, 4, 6, 9]}


def javascript(size, seed):
    """Made-up JavaScript in the style of the matrix's gzip-64k-js file (bench/src/matrix/
    scenario.rs): functions of statements over a small vocabulary."""
    rng = random.Random(seed)
    names = ["value", "index", "length", "items", "result", "options", "element", "state",
             "props", "callback", "request", "response", "config", "count", "offset", "buffer",
             "node", "parent", "children", "target", "event", "handler", "cache", "key"]
    calls = ["push", "map", "filter", "forEach", "indexOf", "slice", "join", "reduce", "get",
             "set"]
    out, f = [], 0
    total = 0
    while total < size:
        a, b = rng.choice(names), rng.choice(names)
        lines = [f"function {a}_{f}({a}, {b}) {{\n"]
        for _ in range(2 + rng.randrange(6)):
            x, y = rng.choice(names), rng.choice(names)
            kind = rng.randrange(5)
            if kind == 0:
                lines.append(f"  const {x}{rng.randrange(9)} = {y}.{rng.choice(calls)}"
                             f"({rng.randrange(100)});\n")
            elif kind == 1:
                lines.append(f"  if ({x}.{y} === {rng.randrange(1000)}) {{ return null; }}\n")
            elif kind == 2:
                lines.append(f"  {x}.{rng.choice(calls)} = \"{y}-{rng.randrange(50)}\";\n")
            elif kind == 3:
                lines.append(f"  for (let i = 0; i < {x}.length; i++) {{ {y}[i] += {x}[i]; }}\n")
            else:
                lines.append(f"  return {a}.{rng.choice(calls)}({x}, {b}.{y});\n")
        lines.append("}\n\n")
        chunk = "".join(lines)
        out.append(chunk)
        total += len(chunk)
        f += 1
    return "".join(out).encode()[:size]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One servery, pinned, one worker, with its admin listener."""

    def __init__(self, binary, root, cpu, extra):
        self.port, self.admin = free_port(), free_port()
        args = ["taskset", "-c", str(cpu), binary, "serve", root, "--workers", "1",
                "--cpus", str(cpu), "--bind", f"127.0.0.1:{self.port}",
                "--admin", f"127.0.0.1:{self.admin}"] + extra
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        if "ready" not in line:
            raise SystemExit(f"servery did not start: {line} {self.proc.stderr.read()}")
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def get(self, path, coding):
        self.conn.request("GET", path, headers={"Accept-Encoding": coding})
        r = self.conn.getresponse()
        body = r.read()
        return r.getheader("Content-Encoding"), len(body)

    def cpu_ns(self):
        """(worker threads, compressor thread) run time so far, nanoseconds."""
        worker = compressor = 0
        base = f"/proc/{self.proc.pid}/task"
        for tid in os.listdir(base):
            try:
                with open(f"{base}/{tid}/comm") as f:
                    comm = f.read().strip()
                with open(f"{base}/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except OSError:
                continue
            if comm == "servery-compr":
                compressor += ns
            else:
                worker += ns
        return worker, compressor

    def metric(self, name):
        c = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def stop(self):
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)


def docroot(size, trials):
    root = tempfile.mkdtemp(prefix="compress-cold.")
    for i in range(trials):
        with open(os.path.join(root, f"f{i}.js"), "wb") as f:
            f.write(javascript(size, 1000 * size + i))
    return root


def measure(server, path, coding, background):
    """One cold then one warm request for `path`."""
    w0, c0 = server.cpu_ns()
    t0 = time.perf_counter()
    enc, sent = server.get(path, coding)
    wall = time.perf_counter() - t0
    w1, c1 = server.cpu_ns()
    sample = {"path": path, "coding": coding, "first_encoding": enc, "first_bytes": sent,
              "first_wall_us": wall * 1e6, "first_server_cpu_us": (w1 - w0) / 1e3}
    if background:
        made = server.metric("servery_compress_background_total")
        t0 = time.perf_counter()
        deadline = t0 + 60
        while server.metric("servery_compress_background_total") <= made and \
                time.perf_counter() < deadline:
            time.sleep(0.002)
        sample["variant_after_ms"] = (time.perf_counter() - t0) * 1e3
        _, c2 = server.cpu_ns()
        sample["compressor_cpu_us"] = (c2 - c0) / 1e3
    w2, _ = server.cpu_ns()
    t0 = time.perf_counter()
    enc, sent = server.get(path, coding)
    wall = time.perf_counter() - t0
    w3, _ = server.cpu_ns()
    sample.update({"warm_encoding": enc, "warm_bytes": sent, "warm_wall_us": wall * 1e6,
                   "warm_server_cpu_us": (w3 - w2) / 1e3})
    return sample


def med(samples, key):
    values = [s[key] for s in samples if s.get(key) is not None]
    return statistics.median(values) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servery", required=True)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--levels", action="store_true")
    ap.add_argument("--no-cold", action="store_true", help="only the --levels sweep")
    ap.add_argument("--codings", default=",".join(CODINGS), help="e.g. br,gzip")
    ap.add_argument("--json")
    a = ap.parse_args()
    with open(a.servery, "rb") as f:
        binary_sha = hashlib.sha256(f.read()).hexdigest()
    result = {"command": " ".join(sys.argv), "kernel": platform.release(),
              "machine": platform.machine(), "servery_sha256": binary_sha,
              "cold": [], "levels": []}
    print(f"{'coding':6} {'size':4} {'path':10} {'first wall ms':>13} {'worker CPU ms':>13} "
          f"{'variant after ms':>16} {'compressor CPU ms':>17} {'bytes':>8} "
          f"{'warm wall ms':>12} {'warm CPU us':>11}")
    codings = a.codings.split(",")
    for size_name, size in ([] if a.no_cold else SIZES.items()):
        root = docroot(size, a.trials)
        background = size > 64 * KIB
        for coding in codings:
            server = Server(a.servery, root, a.server_cpu, [])
            samples = [measure(server, f"/f{i}.js", coding, background)
                       for i in range(a.trials)]
            server.stop()
            for s in samples:
                s["size"] = size
            result["cold"].extend(samples)
            path = "background" if background else "inline"
            print(f"{coding:6} {size_name:4} {path:10} {med(samples, 'first_wall_us') / 1e3:13.3f} "
                  f"{med(samples, 'first_server_cpu_us') / 1e3:13.3f} "
                  f"{med(samples, 'variant_after_ms'):16.1f} "
                  f"{med(samples, 'compressor_cpu_us') / 1e3:17.3f} "
                  f"{int(med(samples, 'warm_bytes')):8d} {med(samples, 'warm_wall_us') / 1e3:12.3f} "
                  f"{med(samples, 'warm_server_cpu_us'):11.1f}")
        # The other option: the 1 MiB file compressed inline, the first request waiting.
        if background:
            for coding in codings:
                server = Server(a.servery, root, a.server_cpu,
                                ["--compress-inline-max-bytes", str(size)])
                samples = [measure(server, f"/f{i}.js", coding, False) for i in range(a.trials)]
                server.stop()
                for s in samples:
                    s["size"], s["inline_forced"] = size, True
                result["cold"].extend(samples)
                print(f"{coding:6} {size_name:4} {'inline*':10} "
                      f"{med(samples, 'first_wall_us') / 1e3:13.3f} "
                      f"{med(samples, 'first_server_cpu_us') / 1e3:13.3f} {'':16} {'':17} "
                      f"{int(med(samples, 'warm_bytes')):8d} "
                      f"{med(samples, 'warm_wall_us') / 1e3:12.3f} "
                      f"{med(samples, 'warm_server_cpu_us'):11.1f}")
        subprocess.run(["rm", "-rf", root], check=True)
    if a.levels:
        size = SIZES["64k"]
        root = docroot(size, a.trials)
        print(f"\n{'coding':6} {'level':>5} {'bytes':>8} {'ratio':>6} {'worker CPU ms':>13} "
              f"{'us/KiB':>7}")
        for coding in codings:
            for level in LEVELS[coding]:
                server = Server(a.servery, root, a.server_cpu,
                                [f"--compress-level-{coding}", str(level)])
                samples = [measure(server, f"/f{i}.js", coding, False) for i in range(a.trials)]
                server.stop()
                cpu = med(samples, "first_server_cpu_us") - med(samples, "warm_server_cpu_us")
                sent = med(samples, "warm_bytes")
                row = {"coding": coding, "level": level, "bytes": sent, "ratio": size / sent,
                       "first_cpu_us": med(samples, "first_server_cpu_us"),
                       "compress_cpu_us": cpu, "us_per_kib": cpu / (size / KIB),
                       "samples": samples}
                result["levels"].append(row)
                print(f"{coding:6} {level:5d} {int(sent):8d} {size / sent:6.2f} "
                      f"{row['first_cpu_us'] / 1e3:13.3f} {row['us_per_kib']:7.2f}")
        subprocess.run(["rm", "-rf", root], check=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
