#!/usr/bin/env bash
# Ready time: how long from spawning `servery serve` until the first valid
# 200 response, for --isolation process with 1, 2 and 4 workers and, for
# comparison, --isolation thread with the same counts.
#
# Flow:
#   1. Parse options, build target/release-lto/servery (the measured profile:
#      fat LTO, one codegen unit) if it is missing or older
#      than the sources.
#   2. Make a temp docroot with one small file; record machine, kernel,
#      commit and binary hash.
#   3. For each configuration: one unmeasured run (page cache, dynamic
#      loader), then --runs measured runs. A run picks a free port, notes the
#      monotonic clock, spawns the server, and polls that port (connect,
#      GET, read to close) every 0.5 ms until a response is a 200 with the
#      right body: that instant minus the spawn instant is the ready time.
#      The ready line's arrival on stdout is noted too (it follows the READY
#      quorum, so it may come after the first 200). Once it is out, SIGTERM;
#      the run must exit 0 within 10 s.
#   4. Print min / median / max per configuration and write every sample to
#      a JSON file.
#
# Workers are pinned (`--workers N`, default CPUs) when the machine has N
# allowed CPUs, else run with --no-pin; the table says which.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [options]

Measures spawn -> first valid 200 response of servery, process and thread
isolation, 1, 2 and 4 workers.

  --runs N            measured runs per configuration   (default 10)
  --workers LIST      worker counts, comma-separated    (default 1,2,4)
  --json FILE         where to write results
                      (default bench/results/ready-time-<UTC time>.json)
  --servery-bin PATH  use this binary; do not build
  -h, --help          this text

Output: a table (min, median, max of the time to the first 200 and the
median time to the ready line, in ms) and a JSON file with every sample.
USAGE
}

runs=10
worker_counts=1,2,4
json_out=""
servery_bin=""

while (($#)); do
	case $1 in
	--runs | --workers | --json | --servery-bin)
		need_value "$1" "${2:-}"
		;;&
	--runs) need_uint "$1" "$2" 1 && runs=$2 && shift ;;
	--workers)
		[[ $2 =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--workers wants e.g. 1,2,4, got '$2'"
		worker_counts=$2
		shift
		;;
	--json) json_out=$2 && shift ;;
	--servery-bin) servery_bin=$2 && shift ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		die "unknown option '$1'"
		;;
	esac
	shift
done

# --- 1. binary ---------------------------------------------------------------

need_cmd python3 "install Python 3"
if [[ -n $servery_bin ]]; then
	[[ -x $servery_bin ]] || die "--servery-bin '$servery_bin' is not an executable"
else
	servery_bin=${CARGO_TARGET_DIR:-$repo/target}/release-lto/servery
	stale=""
	if [[ -x $servery_bin ]]; then
		stale=$(find "$repo/src" "$repo/Cargo.toml" "$repo/Cargo.lock" \
			-newer "$servery_bin" -print -quit 2>/dev/null || true)
	fi
	if [[ ! -x $servery_bin || -n $stale ]]; then
		need_cmd cargo "install Rust (https://rustup.rs) to build servery"
		log "building servery (cargo build --profile release-lto --bin servery)"
		(cd "$repo" && cargo build --profile release-lto --bin servery) >&2 || die "cargo build failed"
		[[ -x $servery_bin ]] || die "cargo build made no $servery_bin"
	fi
fi
servery_bin=$(cd "$(dirname "$servery_bin")" && pwd)/$(basename "$servery_bin")

if [[ -z $json_out ]]; then
	json_out=$repo/bench/results/ready-time-$(date -u +%Y%m%dT%H%M%SZ).json
fi
mkdir -p "$(dirname "$json_out")"

# --- 2-4. measure (Python: sub-millisecond polling without forking) ----------

tmp=$(mktemp -d "${TMPDIR:-/tmp}/servery-ready.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docroot"
printf 'ready\n' >"$tmp/docroot/index.html"

commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
if [[ -n $(git -C "$repo" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null) ]]; then
	commit="$commit (src modified)"
fi

python3 - "$servery_bin" "$tmp/docroot" "$runs" "$worker_counts" "$json_out" "$commit" <<'PY'
import hashlib
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

binary, root, runs, counts, json_out, commit = sys.argv[1:7]
runs = int(runs)
counts = [int(c) for c in counts.split(",")]
allowed = len(os.sched_getaffinity(0))
BODY = b"ready\n"
LIMIT_S = 10.0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def answered(port):
    """One GET; True for a 200 with the expected body."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return False
    head, _, body = data.partition(b"\r\n\r\n")
    return head.startswith(b"HTTP/1.1 200 ") and body == BODY


def run_once(isolation, workers):
    port = free_port()
    argv = [binary, "serve", root, "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers), "--isolation", isolation]
    pinned = workers <= allowed
    if not pinned:
        argv.append("--no-pin")
    ready_at = []
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)

    def watch_stdout():
        for line in p.stdout:
            if line.startswith(b"servery: ready on") and not ready_at:
                ready_at.append(time.monotonic())

    reader = threading.Thread(target=watch_stdout, daemon=True)
    reader.start()
    first_200 = None
    while time.monotonic() - t0 < LIMIT_S:
        if answered(port):
            first_200 = time.monotonic()
            break
        if p.poll() is not None:
            break
        time.sleep(0.0005)
    # Workers commit together but report READY one by one: a first 200 can
    # come before the READY quorum. A SIGTERM before it would roll the start
    # back (exit 1), so stop only once the ready line is out.
    while first_200 is not None and not ready_at and time.monotonic() - t0 < LIMIT_S:
        if p.poll() is not None:
            break
        time.sleep(0.001)
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    reader.join(timeout=1)
    err = p.stderr.read().decode(errors="replace")
    if first_200 is None or rc != 0:
        sys.exit(f"ready-time: {isolation} x{workers}: first 200: {first_200}, "
                 f"exit {rc}\n{err}")
    return {
        "first_200_ms": (first_200 - t0) * 1e3,
        "ready_line_ms": (ready_at[0] - t0) * 1e3 if ready_at else None,
    }, pinned


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


with open(binary, "rb") as f:
    binary_sha256 = hashlib.sha256(f.read()).hexdigest()
meta = {
    "schema": "servery-ready-time/1",
    "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": platform.machine(),
    "cpu": cpu_model(),
    "cpus_allowed": allowed,
    "kernel": platform.release(),
    "commit": commit,
    "binary": binary,
    "binary_sha256": binary_sha256,
    "runs": runs,
}

results = []
for isolation in ("process", "thread"):
    for workers in counts:
        run_once(isolation, workers)  # unmeasured
        samples = []
        pinned = False
        for _ in range(runs):
            s, pinned = run_once(isolation, workers)
            samples.append(s)
        firsts = [s["first_200_ms"] for s in samples]
        readies = [s["ready_line_ms"] for s in samples if s["ready_line_ms"] is not None]
        results.append({
            "isolation": isolation,
            "workers": workers,
            "pinned": pinned,
            "first_200_ms": {
                "min": min(firsts),
                "median": statistics.median(firsts),
                "max": max(firsts),
            },
            "ready_line_ms_median": statistics.median(readies) if readies else None,
            "samples": samples,
        })
        print(f"{isolation} x{workers}: median {statistics.median(firsts):.1f} ms",
              file=sys.stderr)

with open(json_out, "w") as f:
    json.dump({"meta": meta, "results": results}, f, indent=2)
    f.write("\n")

print(f"servery ready time: spawn -> first valid 200, {runs} runs each "
      f"({meta['cpu']}, {allowed} CPUs, Linux {meta['kernel']})")
print(f"commit {commit}, binary sha256 {binary_sha256[:16]}")
print()
print("| isolation | workers | pinning | min ms | median ms | max ms | ready line median ms |")
print("|-----------|--------:|---------|-------:|----------:|-------:|---------------------:|")
for r in results:
    f = r["first_200_ms"]
    ready = r["ready_line_ms_median"]
    print(f"| {r['isolation']} | {r['workers']} | {'pinned' if r['pinned'] else '--no-pin'} "
          f"| {f['min']:.1f} | {f['median']:.1f} | {f['max']:.1f} "
          f"| {'-' if ready is None else f'{ready:.1f}'} |")
print()
print(f"samples: {json_out}")
PY
