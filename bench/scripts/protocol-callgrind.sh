#!/usr/bin/env bash
# Instructions per request of a 1 KiB static file over HTTP/1.1 and over h2c, under callgrind
# (deterministic, unlike time on this 2-core VM), for one or two builds: one epoll worker,
# counters zeroed after a warm-up, --requests requests on one connection (HTTP/1.1 keep-alive
# by servery-load; h2c by prior knowledge, one stream at a time, by h2load), then dumped; the
# whole process counted.
#
# usage: protocol-callgrind.sh [--requests N] [--servery BIN] [--before BIN] [--out DIR]
#                              [--serve-args ARGS] [--before-args ARGS]
# Prints each build's instructions a request for each protocol and, with --before, the
# difference in per cent. --serve-args (and --before-args, for the --before build) are
# more `serve` flags, split on spaces (e.g. "--config rules.toml": the same build with
# and without rules is --servery BIN --before BIN --serve-args "--config rules.toml").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
requests=10000
servery=$repo/target/release/servery
before=""
out=$(mktemp -d /tmp/protocol-callgrind.XXXXXX)
serve_args=""
before_args=""
while (($#)); do
	case $1 in
	--requests) requests=$2 && shift ;;
	--servery) servery=$2 && shift ;;
	--before) before=$2 && shift ;;
	--out) out=$2 && shift ;;
	--serve-args) serve_args=$2 && shift ;;
	--before-args) before_args=$2 && shift ;;
	-h | --help)
		sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "protocol-callgrind.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done
for tool in valgrind callgrind_control callgrind_annotate h2load curl; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIPPED: $tool is not installed (valgrind; scripts/install-peers.sh installs h2load)" >&2
		exit 0
	fi
done
load=${CARGO_TARGET_DIR:-$repo/target}/release/servery-load
[[ -x $load ]] || (cd "$repo" && cargo build --release -p servery-bench)
mkdir -p "$out"
root=$(mktemp -d /tmp/protocol-callgrind-root.XXXXXX)
pid=""
cleanup() {
	[[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$root"
}
trap cleanup EXIT INT TERM
head -c 1024 /dev/zero | tr '\0' 'a' >"$root/1k.txt"

declare -A per
run() { # name binary protocol extra-args
	local name=$1 bin=$2 protocol=$3
	local -a extra
	read -r -a extra <<<"$4"
	local port=$((20000 + RANDOM % 20000))
	valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.$name.$protocol" \
		"$bin" serve --driver epoll --workers 1 --no-pin --bind "127.0.0.1:$port" "${extra[@]}" "$root" \
		>/dev/null 2>"$out/valgrind.$name.$protocol.log" &
	pid=$!
	local url="http://127.0.0.1:$port/1k.txt"
	for _ in $(seq 600); do curl -sf "$url" -o /dev/null && break; sleep 0.1; done
	if [[ $protocol == h1 ]]; then
		"$load" -q -c 1 -n 200 --warmup 0s --duration 60s "$url"
		callgrind_control -z "$pid" >/dev/null
		"$load" -q -c 1 -n "$requests" --warmup 0s --duration 600s "$url"
	else
		h2load -c 1 -m 1 -n 200 "$url" >/dev/null
		callgrind_control -z "$pid" >/dev/null
		h2load -c 1 -m 1 -n "$requests" "$url" >"$out/h2load.$name.log"
		grep -q "succeeded, 0 failed" "$out/h2load.$name.log" || {
			echo "h2load did not succeed: $(grep requests: "$out/h2load.$name.log")" >&2
			exit 1
		}
	fi
	callgrind_control -d "$pid" >/dev/null
	kill "$pid" && wait "$pid" 2>/dev/null || true
	pid=""
	local dump total
	dump=$(ls -t "$out/callgrind.$name.$protocol".* | grep -v '\.log$' | head -1)
	total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
	per[$name.$protocol]=$((total / requests))
	echo "$name $protocol: ${per[$name.$protocol]} instructions a request ($total for $requests; $dump)"
}

for protocol in h1 h2c; do
	[[ -n $before ]] && run before "$before" "$protocol" "$before_args"
	run after "$servery" "$protocol" "$serve_args"
done
if [[ -n $before ]]; then
	for protocol in h1 h2c; do
		b=${per[before.$protocol]} a=${per[after.$protocol]}
		echo "$protocol: after/before = $(python3 -c "print(f'{$a / $b * 100 - 100:+.2f} %')")"
	done
fi
