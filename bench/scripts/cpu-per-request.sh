#!/usr/bin/env bash
# Server CPU per request (user and system apart) for variants of one server binary or
# several, interleaved: for each trial, each variant in turn gets a fresh one-worker server
# pinned to --server-cpu, a 1 s warm-up and a --duration load run (servery-load, closed loop,
# --conns connections, pinned to --client-cpu) on one file, and its utime and stime from
# /proc/PID/stat around the run are divided by the requests completed.
#
# usage: cpu-per-request.sh [--trials N] [--duration S] [--conns N] [--size BYTES]
#        [--server-cpu N] [--client-cpu N] [--json FILE] NAME=BIN[:ARGS] ...
#   ARGS: extra server flags, comma-separated (e.g. mem=target/release/servery
#   sf=target/release/servery:--small-file-max,32768).
# Prints one line per sample and a table of medians; writes every sample, the command,
# kernel, commit and binary sha256 to --json (default bench/results/cpu-per-request-STAMP.json).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
trials=3 duration=5 conns=64 size=1024 server_cpu=0 client_cpu=1
json=$repo/bench/results/cpu-per-request-$(date -u +%Y%m%dT%H%M%SZ).json
variants=()
all_args="$*"
while (($#)); do
	case $1 in
	--trials) trials=$2 && shift ;;
	--duration) duration=$2 && shift ;;
	--conns) conns=$2 && shift ;;
	--size) size=$2 && shift ;;
	--server-cpu) server_cpu=$2 && shift ;;
	--client-cpu) client_cpu=$2 && shift ;;
	--json) json=$2 && shift ;;
	-h | --help)
		sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*=*) variants+=("$1") ;;
	*)
		echo "cpu-per-request.sh: unknown argument $1 (see --help)" >&2
		exit 2
		;;
	esac
	shift
done
((${#variants[@]})) || { echo "cpu-per-request.sh: give at least one NAME=BIN" >&2; exit 2; }
load=${CARGO_TARGET_DIR:-$repo/target}/release/servery-load
[[ -x $load ]] || (cd "$repo" && cargo build --release -p servery-bench)

tmp=$(mktemp -d /tmp/cpu-per-request.XXXXXX)
server_pid=""
cleanup() {
	[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
mkdir "$tmp/root"
head -c "$size" /dev/urandom >"$tmp/root/f.bin"
clk=$(getconf CLK_TCK)
: >"$tmp/samples.jsonl"

for ((t = 1; t <= trials; t++)); do
	for v in "${variants[@]}"; do
		name=${v%%=*} spec=${v#*=}
		bin=${spec%%:*} extra=()
		[[ $spec == *:* ]] && IFS=, read -r -a extra <<<"${spec#*:}"
		taskset -c "$server_cpu" "$bin" serve "$tmp/root" --workers 1 --cpus "$server_cpu" \
			--bind 127.0.0.1:0 "${extra[@]}" >"$tmp/out" 2>"$tmp/err" &
		server_pid=$!
		for _ in $(seq 100); do grep -q "ready on" "$tmp/out" && break; sleep 0.05; done
		port=$(sed -n 's/.*ready on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/out" | head -n1)
		[[ -n $port ]] || { echo "cpu-per-request.sh: $name did not start: $(cat "$tmp/err")" >&2; exit 1; }
		url=http://127.0.0.1:$port/f.bin
		taskset -c "$client_cpu" "$load" -t 1 -c "$conns" --cpus "$client_cpu" -d 1s --warmup 0 \
			--quiet --json "$tmp/warm.json" "$url"
		read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$server_pid/stat")
		taskset -c "$client_cpu" "$load" -t 1 -c "$conns" --cpus "$client_cpu" -d "${duration}s" \
			--warmup 0 --no-validate --quiet --json "$tmp/run.json" "$url"
		read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$server_pid/stat")
		kill -INT "$server_pid"
		wait "$server_pid" 2>/dev/null || true
		server_pid=""
		python3 "$here/cpu_sample.py" "$name" "$t" "$u0" "$s0" "$u1" "$s1" "$clk" "$tmp/run.json" \
			>>"$tmp/samples.jsonl"
		tail -n1 "$tmp/samples.jsonl"
	done
done

python3 - "$tmp/samples.jsonl" "$json" "$all_args" "$size" "$conns" "${variants[@]}" <<'PY'
import hashlib, json, platform, statistics, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
variants = sys.argv[6:]
def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()
out = {"command": "bench/scripts/cpu-per-request.sh " + sys.argv[3],
       "size_bytes": int(sys.argv[4]), "conns": int(sys.argv[5]),
       "kernel": platform.release(),
       "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "binaries": {v.split("=", 1)[0]: sha(v.split("=", 1)[1].split(":")[0]) for v in variants},
       "samples": rows, "medians": {}}
print("| variant | req/s | user µs/req | sys µs/req | CPU µs/req |\n|---|--:|--:|--:|--:|")
for v in variants:
    name = v.split("=", 1)[0]
    mine = [r for r in rows if r["variant"] == name]
    med = {k: statistics.median(r[k] for r in mine)
           for k in ("rps", "user_us_per_req", "sys_us_per_req", "cpu_us_per_req")}
    out["medians"][name] = med
    print(f"| {name} | {med['rps']:,.0f} | {med['user_us_per_req']:.2f} | {med['sys_us_per_req']:.2f} | {med['cpu_us_per_req']:.2f} |")
json.dump(out, open(sys.argv[2], "w"), indent=1)
print("results:", sys.argv[2])
PY
