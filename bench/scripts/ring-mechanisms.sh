#!/usr/bin/env bash
# The io_uring mechanisms servery's runtime does not expose, measured against what servery
# does, for docs/decisions/0001-idle-reads.md:
#   1. receive: servery itself, and `servery-load probe` with single-shot receive (one 8 KiB
#      buffer per connection, servery's shape) and with multishot receive over a shared
#      provided-buffer ring: idle bytes per connection after 1 KiB and 64 KiB responses, and
#      server CPU per request at 64 connections (bench/scripts/idle-reads.sh does these, with
#      the probe started through a small wrapper that takes servery's command line);
#   2. send: the probe answering a 64 KiB file with writev (head + body, servery's shape) or
#      with SEND_ZC, server CPU per request and req/s at 64 connections.
# One run, interleaved per trial (A B C, A B C, ...), server on --server-cpu, client on
# --client-cpu, never two measurements at once.
#
# usage: ring-mechanisms.sh [--trials N] [--duration S] [--conns N] [--json-dir DIR]
#        [--server-cpu N] [--client-cpu N]
# Needs target/release/servery and target/release/servery-load (built if missing).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
trials=3
duration=5
conns=2000
server_cpu=0
client_cpu=1
json_dir=$repo/bench/results

while (($#)); do
	case $1 in
	--trials) trials=$2 && shift ;;
	--duration) duration=$2 && shift ;;
	--conns) conns=$2 && shift ;;
	--json-dir) json_dir=$2 && shift ;;
	--server-cpu) server_cpu=$2 && shift ;;
	--client-cpu) client_cpu=$2 && shift ;;
	-h | --help)
		sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "ring-mechanisms.sh: unknown option $1 (see --help)" >&2
		exit 2
		;;
	esac
	shift
done

target=${CARGO_TARGET_DIR:-$repo/target}
servery=$target/release/servery
load=$target/release/servery-load
if [[ ! -x $servery || ! -x $load ]]; then
	(cd "$repo" && cargo build --release -p servery -p servery-bench)
fi

tmp=$(mktemp -d /tmp/ring-mechanisms.XXXXXX)
server_pid=""
cleanup() {
	[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# A wrapper per receive mode: takes servery's `serve ROOT ... --bind ADDR` and starts the
# probe on the same root and address, so idle-reads.sh starts it as it starts servery.
for mode in single multishot; do
	cat >"$tmp/probe-$mode" <<WRAP
#!/usr/bin/env bash
root=\$2; bind=127.0.0.1:0
while ((\$#)); do [[ \$1 == --bind ]] && bind=\$2; shift; done
exec "$load" probe --recv $mode --root "\$root" --bind "\$bind" --cpu $server_cpu
WRAP
	chmod +x "$tmp/probe-$mode"
done

stamp=$(date -u +%Y%m%dT%H%M%SZ)
echo "== 1. receive: servery vs probe single vs probe multishot"
"$here/idle-reads.sh" --trials "$trials" --duration "$duration" --conns "$conns" \
	--server-cpu "$server_cpu" --client-cpu "$client_cpu" \
	--json "$json_dir/ring-recv-$stamp.json" \
	servery="$servery" probe-single="$tmp/probe-single" probe-multishot="$tmp/probe-multishot"

echo "== 2. send: 64 KiB by writev vs SEND_ZC (probe, multishot receive)"
mkdir -p "$tmp/root"
head -c 65536 /dev/urandom >"$tmp/root/64k.bin"
clk=$(getconf CLK_TCK)
samples=$tmp/send.jsonl
: >"$samples"
for ((t = 1; t <= trials; t++)); do
	for send in writev zc; do
		taskset -c "$server_cpu" "$load" probe --recv multishot --send "$send" --root "$tmp/root" \
			--bind 127.0.0.1:0 --cpu "$server_cpu" >"$tmp/probe.out" &
		server_pid=$!
		for _ in $(seq 100); do grep -q "ready on" "$tmp/probe.out" && break; sleep 0.05; done
		port=$(sed -n 's/.*ready on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/probe.out")
		url=http://127.0.0.1:$port/64k.bin
		taskset -c "$client_cpu" "$load" -t 1 -c 64 --cpus "$client_cpu" -d 1s --warmup 0 \
			--quiet --json "$tmp/warm.json" "$url"
		read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$server_pid/stat")
		taskset -c "$client_cpu" "$load" -t 1 -c 64 --cpus "$client_cpu" -d "${duration}s" \
			--warmup 0 --no-validate --quiet --json "$tmp/run.json" "$url"
		read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$server_pid/stat")
		kill "$server_pid"
		wait "$server_pid" 2>/dev/null || true
		server_pid=""
		python3 - "$send" "$t" "$u0" "$s0" "$u1" "$s1" "$clk" "$tmp/run.json" >>"$samples" <<'PY'
import json, sys
send, trial, u0, s0, u1, s1, clk, path = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:8]), sys.argv[8]
r = json.load(open(path))
n = r["requests"]
print(json.dumps({"send": send, "trial": trial, "requests": n, "rps": r["rps"],
                  "user_us_per_req": (u1 - u0) / clk / n * 1e6,
                  "cpu_us_per_req": ((u1 - u0) + (s1 - s0)) / clk / n * 1e6}))
PY
		tail -n1 "$samples"
	done
done
python3 - "$samples" "$json_dir/ring-send-$stamp.json" "$*" <<'PY'
import json, statistics, sys, platform, subprocess
rows = [json.loads(l) for l in open(sys.argv[1])]
out = {"command": "bench/scripts/ring-mechanisms.sh " + sys.argv[3],
       "kernel": platform.release(),
       "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "samples": rows, "medians": {}}
print("| send | req/s | server CPU µs/req |\n|---|--:|--:|")
for send in ("writev", "zc"):
    mine = [r for r in rows if r["send"] == send]
    med = {k: statistics.median(r[k] for r in mine) for k in ("rps", "cpu_us_per_req")}
    out["medians"][send] = med
    print(f"| {send} | {med['rps']:,.0f} | {med['cpu_us_per_req']:.2f} |")
json.dump(out, open(sys.argv[2], "w"), indent=1)
print("results:", sys.argv[2])
PY
