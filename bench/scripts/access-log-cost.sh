#!/usr/bin/env bash
# What the access log costs a request: servery and nginx, each with the log off and on
# (combined, to a file; nginx with `buffer=64k flush=1s`), interleaved. For each trial each
# variant gets a fresh one-worker server pinned to --server-cpu, a 1 s warm-up and a
# --duration closed-loop load (servery-load, --conns connections, pinned to --client-cpu) on
# one file; the server's CPU (every process and thread: nginx's master and worker) from /proc
# around the run is divided by the requests completed.
#
# usage: access-log-cost.sh [--trials N] [--duration S] [--conns N] [--size BYTES]
#        [--server-cpu N] [--client-cpu N] [--servery BIN] [--json FILE]
# Prints a line per sample and a table of medians with each server's on/off ratio; writes the
# samples and the command to --json (default bench/results/access-log-cost-STAMP.json).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=/dev/null
source "$repo/scripts/lib/common.sh"
# shellcheck source=/dev/null
source "$repo/scripts/lib/nginx.sh"
trials=5 duration=5 conns=64 size=1024 server_cpu=0 client_cpu=1
servery=${CARGO_TARGET_DIR:-$repo/target}/release/servery
json=$repo/bench/results/access-log-cost-$(date -u +%Y%m%dT%H%M%SZ).json
all_args="$*"
while (($#)); do
	case $1 in
	--trials) trials=$2 && shift ;;
	--duration) duration=$2 && shift ;;
	--conns) conns=$2 && shift ;;
	--size) size=$2 && shift ;;
	--server-cpu) server_cpu=$2 && shift ;;
	--client-cpu) client_cpu=$2 && shift ;;
	--servery) servery=$2 && shift ;;
	--json) json=$2 && shift ;;
	-h | --help)
		sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "access-log-cost.sh: unknown argument $1 (see --help)" ;;
	esac
	shift
done
load=${CARGO_TARGET_DIR:-$repo/target}/release/servery-load
[[ -x $load ]] || (cd "$repo" && cargo build --release -p servery-bench)
[[ -x $servery ]] || (cd "$repo" && cargo build --release --bin servery)
command -v nginx >/dev/null || die "nginx is not installed: run scripts/install-peers.sh"

tmp=$(mktemp -d /tmp/access-log-cost.XXXXXX)
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
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# utime and stime of every thread of PID and its children.
cpu_of() {
	local u=0 s=0 a b p t
	for p in "$1" $(pgrep -P "$1" || true); do
		for t in /proc/"$p"/task/*/stat; do
			read -r a b < <(awk '{print $14, $15}' "$t" 2>/dev/null || echo "0 0")
			u=$((u + a)) s=$((s + b))
		done
	done
	echo "$u $s"
}

start() {
	local log=$tmp/$1.log
	rm -f "$log"
	case $1 in
	servery-off | servery-on)
		local extra=()
		[[ $1 == servery-on ]] && extra=(--access-log "$log")
		taskset -c "$server_cpu" "$servery" serve "$tmp/root" --workers 1 --cpus "$server_cpu" \
			--bind "127.0.0.1:$port" "${extra[@]}" >"$tmp/out" 2>"$tmp/err" &
		;;
	nginx-off | nginx-on)
		if [[ $1 == nginx-on ]]; then
			export NGINX_ACCESS_LOG="\"$log\" combined buffer=64k flush=1s"
		else
			unset NGINX_ACCESS_LOG
		fi
		write_nginx_conf "$tmp/nginx" "$tmp/root" "$port" 1 "$server_cpu"
		nginx_args "$tmp/nginx"
		taskset -c "$server_cpu" nginx "${NGINX_ARGS[@]}" >"$tmp/out" 2>"$tmp/err" &
		;;
	esac
	server_pid=$!
	for _ in $(seq 100); do
		curl -s -o /dev/null "http://127.0.0.1:$port/f.bin" && return
		sleep 0.05
	done
	die "$1 did not start: $(cat "$tmp/err")"
}

variants=(servery-off servery-on nginx-off nginx-on)
for ((t = 1; t <= trials; t++)); do
	for v in "${variants[@]}"; do
		start "$v"
		url=http://127.0.0.1:$port/f.bin
		taskset -c "$client_cpu" "$load" -t 1 -c "$conns" --cpus "$client_cpu" -d 1s --warmup 0 \
			--quiet --json "$tmp/warm.json" "$url"
		read -r u0 s0 < <(cpu_of "$server_pid")
		taskset -c "$client_cpu" "$load" -t 1 -c "$conns" --cpus "$client_cpu" -d "${duration}s" \
			--warmup 0 --no-validate --quiet --json "$tmp/run.json" "$url"
		read -r u1 s1 < <(cpu_of "$server_pid")
		kill -TERM "$server_pid"
		wait "$server_pid" 2>/dev/null || true
		server_pid=""
		lines=0
		[[ -f $tmp/$v.log ]] && lines=$(wc -l <"$tmp/$v.log")
		python3 "$here/cpu_sample.py" "$v" "$t" "$u0" "$s0" "$u1" "$s1" "$clk" "$tmp/run.json" "log_lines=$lines" \
			>>"$tmp/samples.jsonl"
		tail -n1 "$tmp/samples.jsonl"
	done
done

python3 - "$tmp/samples.jsonl" "$json" "$all_args" "$size" "$conns" "${variants[@]}" <<'PY'
import json, platform, statistics, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
variants = sys.argv[6:]
out = {"command": "bench/scripts/access-log-cost.sh " + sys.argv[3],
       "size_bytes": int(sys.argv[4]), "conns": int(sys.argv[5]),
       "kernel": platform.release(),
       "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "samples": rows, "medians": {}}
print("| variant | req/s | user µs/req | sys µs/req | CPU µs/req |\n|---|--:|--:|--:|--:|")
for name in variants:
    mine = [r for r in rows if r["variant"] == name]
    med = {k: statistics.median(r[k] for r in mine)
           for k in ("rps", "user_us_per_req", "sys_us_per_req", "cpu_us_per_req")}
    out["medians"][name] = med
    print(f"| {name} | {med['rps']:,.0f} | {med['user_us_per_req']:.2f} | {med['sys_us_per_req']:.2f} | {med['cpu_us_per_req']:.2f} |")
for server in ("servery", "nginx"):
    on, off = out["medians"][server + "-on"], out["medians"][server + "-off"]
    ratio = on["cpu_us_per_req"] / off["cpu_us_per_req"]
    # The same ratio per trial (each trial's on and off ran back to back).
    per_trial = []
    for t in sorted({r["trial"] for r in rows}):
        a = [r for r in rows if r["trial"] == t and r["variant"] == server + "-on"]
        b = [r for r in rows if r["trial"] == t and r["variant"] == server + "-off"]
        if a and b:
            per_trial.append(a[0]["cpu_us_per_req"] / b[0]["cpu_us_per_req"])
    out["medians"][server + "-ratio"] = {"median_of_medians": ratio,
                                          "median_per_trial": statistics.median(per_trial)}
    print(f"{server}: log on / off CPU per request = {ratio:.3f} (median of per-trial ratios {statistics.median(per_trial):.3f})")
json.dump(out, open(sys.argv[2], "w"), indent=1)
print("results:", sys.argv[2])
PY
