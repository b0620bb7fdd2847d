#!/usr/bin/env bash
# What site lookup costs, in instructions per request under callgrind (deterministic, unlike
# time on this 2-core VM): one epoll worker, a 1 KiB file, counters zeroed after a warm-up,
# --requests keep-alive requests on one connection, then dumped; the whole process counted.
#
# Variants:
#   before  --before BIN (a build without sites) serving ROOT: the baseline
#   one     this build serving ROOT: the one-site case (no [[site]]; no lookup at all)
#   two     two [[site]]s, the request's Host the second's: one hash lookup
#   many    the same with 10,000 more exact hosts on the first site (O(1) in hosts)
#   wild    the Host matched by a wildcard three labels down, beside 10,000 exact hosts
#
# usage: sites-callgrind.sh [--requests N] [--servery BIN] [--before BIN] [--out DIR]
# Prints each variant's instructions a request and its difference from `one`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
requests=20000
servery=$repo/target/release/servery
before=""
out=$(mktemp -d /tmp/sites-callgrind.XXXXXX)
while (($#)); do
	case $1 in
	--requests) requests=$2 && shift ;;
	--servery) servery=$2 && shift ;;
	--before) before=$2 && shift ;;
	--out) out=$2 && shift ;;
	-h | --help)
		sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "sites-callgrind.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done
load=${CARGO_TARGET_DIR:-$repo/target}/release/servery-load
[[ -x $load ]] || (cd "$repo" && cargo build --release -p servery-bench)
mkdir -p "$out"
root=$(mktemp -d /tmp/sites-callgrind-root.XXXXXX)
pid=""
cleanup() {
	[[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$root"
}
trap cleanup EXIT INT TERM

mkdir -p "$root/a" "$root/b"
head -c 1024 /dev/zero | tr '\0' 'a' >"$root/a/1k.txt"
head -c 1024 /dev/zero | tr '\0' 'b' >"$root/b/1k.txt"
cp "$root/b/1k.txt" "$root/1k.txt"
two="[[site]]
hosts = [\"a.test\"]
root = \"$root/a\"
[[site]]
hosts = [\"b.test\", \"*.b.test\"]
root = \"$root/b\"
"
printf '%s' "$two" >"$root/two.toml"
python3 - "$root" <<'PY'
import sys
root = sys.argv[1]
hosts = ", ".join(f'"h{i}.example.test"' for i in range(10000))
text = (f'[[site]]\nhosts = ["a.test", {hosts}]\nroot = "{root}/a"\n'
        f'[[site]]\nhosts = ["b.test", "*.b.test"]\nroot = "{root}/b"\n')
open(f"{root}/many.toml", "w").write(text)
PY

declare -A per
run() { # variant binary host args...
	local variant=$1 bin=$2 host=$3
	shift 3
	local port=$((20000 + RANDOM % 20000))
	valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.$variant" \
		"$bin" serve --driver epoll --workers 1 --no-pin --bind "127.0.0.1:$port" "$@" \
		>/dev/null 2>"$out/valgrind.$variant.log" &
	pid=$!
	for _ in $(seq 600); do curl -sf -H "Host: $host" "http://127.0.0.1:$port/1k.txt" -o /dev/null && break; sleep 0.1; done
	local url="http://127.0.0.1:$port/1k.txt"
	"$load" -q -c 1 -n 200 --warmup 0s --duration 60s -H "Host: $host" "$url"
	callgrind_control -z "$pid" >/dev/null
	"$load" -q -c 1 -n "$requests" --warmup 0s --duration 600s -H "Host: $host" "$url"
	callgrind_control -d "$pid" >/dev/null
	kill "$pid" && wait "$pid" 2>/dev/null || true
	pid=""
	local dump total
	dump=$(ls -t "$out/callgrind.$variant".* | grep -v '\.log$' | head -1)
	total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
	per[$variant]=$((total / requests))
	echo "$variant: ${per[$variant]} instructions a request ($total for $requests; $dump)"
}

if [[ -n $before ]]; then
	run before "$before" b.test "$root"
fi
run one "$servery" b.test "$root"
run two "$servery" b.test --config "$root/two.toml"
run many "$servery" b.test --config "$root/many.toml"
run wild "$servery" x.y.z.b.test --config "$root/many.toml"
for v in before two many wild; do
	[[ -n ${per[$v]:-} ]] && echo "$v minus one: $((per[$v] - per[one])) instructions a request"
done
