#!/usr/bin/env bash
# Client efficiency: servery-load against wrk, one thread each, pinned to the
# same CPU, loading the same servery (one worker, pinned to another CPU) with
# the same file and connection count, interleaved A B A B so drift on a noisy
# machine hits both alike.
#
# Flow:
#   1. Build (or take) servery and servery-load; write a docroot with one
#      random file; start servery once.
#   2. For each round: run wrk, then servery-load (the order alternates each
#      round), each for --duration, no warm-up, no pre-run validation. The
#      client's CPU is this shell's cutime+cstime delta across `wait` (proc(5)),
#      so both tools are charged the same way: their whole process, setup and
#      connects included.
#   3. Print one row per run and the medians: req/s, client CPU µs per request,
#      p99; write them to bench/results/client-efficiency-<UTC time>.json.
#
# Run scripts/install-peers.sh first for wrk.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib/common.sh
. "$repo/scripts/lib/common.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [options]
  --rounds N          rounds; each runs wrk once and servery-load once (default 4)
  --duration S        seconds per run                                  (default 10)
  --connections N     connections                                      (default 256)
  --size BYTES        file size                                        (default 1024)
  --server-cpu N      CPU for servery                                  (default 0)
  --client-cpu N      CPU for the client under test                    (default 1)
  --servery-bin PATH  servery to load (default: build it)
  --load-bin PATH     servery-load to compare (default: build it)
USAGE
}

rounds=4
duration=10
connections=256
size=1024
server_cpu=0
client_cpu=1
servery_bin=""
load_bin=""
argv=("$@")
while (($#)); do
	case $1 in
	--rounds | --duration | --connections | --size | --server-cpu | --client-cpu | --servery-bin | --load-bin)
		need_value "$1" "${2:-}"
		;;&
	--rounds) rounds=$2 && shift ;;
	--duration) duration=$2 && shift ;;
	--connections) connections=$2 && shift ;;
	--size) size=$2 && shift ;;
	--server-cpu) server_cpu=$2 && shift ;;
	--client-cpu) client_cpu=$2 && shift ;;
	--servery-bin) servery_bin=$2 && shift ;;
	--load-bin) load_bin=$2 && shift ;;
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
for n in "$rounds" "$duration" "$connections" "$size" "$server_cpu" "$client_cpu"; do
	[[ $n =~ ^[0-9]+$ ]] || die "'$n' is not a number"
done
((server_cpu != client_cpu)) || die "--server-cpu and --client-cpu must differ"

# --- 1. programs, docroot, server ------------------------------------------

need_cmd wrk "run scripts/install-peers.sh"
need_cmd taskset "install util-linux"
need_cmd python3 "install Python 3"
target=${CARGO_TARGET_DIR:-$repo/target}
if [[ -z $servery_bin || -z $load_bin ]]; then
	log "building servery and servery-load (release)"
	(cd "$repo" && cargo build --release --bin servery && cargo build --release -p servery-bench) >&2
fi
servery_bin=${servery_bin:-$target/release/servery}
load_bin=${load_bin:-$target/release/servery-load}
[[ -x $servery_bin ]] || die "no servery at $servery_bin"
[[ -x $load_bin ]] || die "no servery-load at $load_bin"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/client-efficiency.XXXXXX")
server_pid=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [[ -n $server_pid ]]; then
		stop_pid "$server_pid" 35 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/root"
head -c "$size" /dev/urandom >"$tmp/root/file.bin"
port=$(free_port)
url=http://127.0.0.1:$port/file.bin
taskset -c "$server_cpu" "$servery_bin" serve "$tmp/root" --bind "127.0.0.1:$port" \
	--workers 1 --cpus "$server_cpu" >"$tmp/servery.log" 2>&1 &
server_pid=$!
wait_line "$tmp/servery.log" 'ready on' 30 "$server_pid" || die "servery did not start: $(cat "$tmp/servery.log")"

# --- 2. rounds -------------------------------------------------------------

clk_tck=$(getconf CLK_TCK)
rows=$tmp/rows.jsonl
: >"$rows"
# run_client NAME ROUND: one run of NAME; appends a JSON row.
run_client() {
	local name=$1 round=$2 out=$tmp/$1-$2.out before pid
	child_cpu_ticks
	before=$CHILD_TICKS
	case $name in
	wrk)
		taskset -c "$client_cpu" wrk -t1 -c"$connections" -d"${duration}s" --latency "$url" >"$out" &
		;;
	servery-load)
		taskset -c "$client_cpu" "$load_bin" -t 1 -c "$connections" --cpus "$client_cpu" \
			-d "${duration}s" --warmup 0 --no-validate --quiet --json "$out" "$url" &
		;;
	esac
	pid=$!
	wait "$pid" || die "$name failed: $(cat "$out")"
	child_cpu_ticks
	python3 - "$name" "$round" "$out" "$((CHILD_TICKS - before))" "$clk_tck" >>"$rows" <<'PY'
import json, re, sys
name, rnd, out, ticks, hz = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
text = open(out).read()
def us(v, unit):
    return float(v) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]
if name == "wrk":
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", text)
    p99 = us(*m.groups()) if m else None
    bad = re.search(r"Socket errors: (.*)|Non-2xx or 3xx responses: (\d+)", text)
    errors = bad.group(0) if bad else ""
else:
    r = json.loads(text)
    requests, rps, p99 = r["requests"], r["rps"], r["latency_us"]["p99"]
    errors = "" if r["errors"]["total"] == 0 else json.dumps(r["errors"])
cpu_s = ticks / hz
print(json.dumps({"client": name, "round": rnd, "requests": requests, "rps": rps,
                  "p99_us": p99, "client_cpu_s": cpu_s,
                  "cpu_us_per_request": cpu_s * 1e6 / requests if requests else None,
                  "errors": errors}))
PY
	log "round $round/$rounds $name: $(tail -n1 "$rows")"
}

for ((round = 1; round <= rounds; round++)); do
	if ((round % 2)); then
		run_client wrk "$round"
		run_client servery-load "$round"
	else
		run_client servery-load "$round"
		run_client wrk "$round"
	fi
done

# --- 3. report -------------------------------------------------------------

mkdir -p "$repo/bench/results"
json_out=$repo/bench/results/client-efficiency-$(date -u +%Y%m%dT%H%M%SZ).json
command_line=$(printf '%q ' "$0" "${argv[@]}")
python3 - "$rows" "$json_out" "${command_line% }" "$repo" "$duration" "$connections" "$size" "$server_cpu" "$client_cpu" <<'PY'
import json, statistics, subprocess, sys, platform
rows_path, out, command, repo = sys.argv[1:5]
duration, connections, size, server_cpu, client_cpu = map(int, sys.argv[5:10])
rows = [json.loads(l) for l in open(rows_path)]
def git(*a):
    try:
        return subprocess.run(["git", "-C", repo, *a], capture_output=True, text=True).stdout.strip()
    except OSError:
        return None
wrk_v = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None)
print("| Round | Client | Req/s | Client CPU µs/req | p99 | Errors |")
print("|--:|---|--:|--:|--:|---|")
for r in rows:
    p99 = f"{r['p99_us'] / 1000:.2f} ms" if r["p99_us"] is not None else "—"
    print(f"| {r['round']} | {r['client']} | {r['rps']:,.0f} | {r['cpu_us_per_request']:.2f} | {p99} | {r['errors'] or 0} |")
print()
print("| Client | Median req/s | Median client CPU µs/req | Median p99 |")
print("|---|--:|--:|--:|")
med = {}
for name in ("wrk", "servery-load"):
    mine = [r for r in rows if r["client"] == name]
    med[name] = {
        "rps": statistics.median(r["rps"] for r in mine),
        "cpu_us_per_request": statistics.median(r["cpu_us_per_request"] for r in mine),
        "p99_us": statistics.median(r["p99_us"] for r in mine if r["p99_us"] is not None),
    }
    m = med[name]
    print(f"| {name} | {m['rps']:,.0f} | {m['cpu_us_per_request']:.2f} | {m['p99_us'] / 1000:.2f} ms |")
ratio = med["servery-load"]["cpu_us_per_request"] / med["wrk"]["cpu_us_per_request"]
print()
print(f"servery-load uses {ratio:.2f}x wrk's client CPU per request.")
json.dump({
    "schema": "servery-client-efficiency/1",
    "command": command,
    "git_commit": git("rev-parse", "HEAD"),
    "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    "kernel": platform.release(),
    "cpu_model": cpu,
    "wrk_version": (wrk_v.stdout + wrk_v.stderr).splitlines()[0] if (wrk_v.stdout + wrk_v.stderr) else None,
    "settings": {"duration_s": duration, "connections": connections, "size_bytes": size,
                 "server_cpu": server_cpu, "client_cpu": client_cpu, "threads": 1},
    "runs": rows, "medians": med, "cpu_per_request_ratio": ratio,
}, open(out, "w"), indent=2)
print(f"\nresults: {out}", file=sys.stderr)
PY
