#!/usr/bin/env bash
# Instructions per request of an on-the-fly gzip hit (the variant from the process-wide cache:
# negotiation over three codings, the key, the cache's Mutex, its hash map and LRU relink, the
# Bytes clone, the worker's prebuilt head) against a precompressed sibling of the very same
# bytes (s.js.gz, served from the open-file cache's memory copy), under callgrind: one epoll
# worker, counters zeroed after a warm-up, --requests requests on one keep-alive connection,
# then dumped. Only what runs inside Files::serve (the static-file pipeline, where the two
# differ) is counted: the whole process's count also grows with wall time (timers, the
# supervisor's beats), which is noise here.
#
# usage: compress-callgrind.sh [--requests N] [--servery BIN] [--out DIR]
# Prints instructions per request for each and their difference; keeps the callgrind files
# (and callgrind_annotate's per-file totals of the hit) in --out.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
requests=20000
servery=$repo/target/release/servery
out=$(mktemp -d /tmp/compress-callgrind.XXXXXX)
while (($#)); do
	case $1 in
	--requests) requests=$2 && shift ;;
	--servery) servery=$2 && shift ;;
	--out) out=$2 && shift ;;
	-h | --help)
		sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "compress-callgrind.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done
load=${CARGO_TARGET_DIR:-$repo/target}/release/servery-load
[[ -x $load ]] || (cd "$repo" && cargo build --release -p servery-bench)
mkdir -p "$out"
root=$(mktemp -d /tmp/compress-callgrind-root.XXXXXX)
pid=""
cleanup() {
	[[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$root"
}
trap cleanup EXIT INT TERM

# a.js and s.js: the same 64 KiB of JavaScript (compress-cold.py's generator); s.js.gz: the
# gzip variant servery makes of it, fetched from a plain servery.
python3 - "$here/compress-cold.py" "$root" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("cold", sys.argv[1])
cold = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cold)
body = cold.javascript(64 * 1024, 7)
for name in ("a.js", "s.js"):
    open(f"{sys.argv[2]}/{name}", "wb").write(body)
PY
port=$((20000 + RANDOM % 20000))
"$servery" serve "$root" --workers 1 --bind "127.0.0.1:$port" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/a.js" -o /dev/null && break; sleep 0.05; done
curl -sf -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/a.js" -o "$root/s.js.gz"
kill "$pid" && wait "$pid" 2>/dev/null || true
pid=""

declare -A per
for variant in otf sibling; do
	path=/a.js
	[[ $variant == sibling ]] && path=/s.js
	port=$((20000 + RANDOM % 20000))
	valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.$variant" \
		--toggle-collect='servery::static_files::Files::serve' \
		"$servery" serve "$root" --driver epoll --workers 1 --no-pin \
		--bind "127.0.0.1:$port" >/dev/null 2>"$out/valgrind.$variant.log" &
	pid=$!
	for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/a.js" -o /dev/null && break; sleep 0.1; done
	url="http://127.0.0.1:$port$path"
	"$load" -q -c 1 -n 200 --warmup 0s --duration 60s -H 'Accept-Encoding: gzip' "$url"
	callgrind_control -z "$pid" >/dev/null
	"$load" -q -c 1 -n "$requests" --warmup 0s --duration 600s -H 'Accept-Encoding: gzip' "$url"
	callgrind_control -d "$pid" >/dev/null
	kill "$pid" && wait "$pid" 2>/dev/null || true
	pid=""
	dump=$(ls -t "$out/callgrind.$variant".* | grep -v '\.log$' | head -1)
	total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
	per[$variant]=$((total / requests))
	echo "$variant: $total instructions for $requests requests, ${per[$variant]} a request ($dump)"
	if [[ $variant == otf ]]; then
		callgrind_annotate --inclusive=no "$dump" 2>/dev/null | head -60 >"$out/annotate.otf.txt"
	fi
done
echo "on-the-fly hit minus sibling: $((per[otf] - per[sibling])) instructions a request"
