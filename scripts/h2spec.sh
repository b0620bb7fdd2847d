#!/usr/bin/env bash
# HTTP/2 conformance of servery with h2spec (146 cases, RFC 9113 and HPACK),
# over TLS (ALPN h2) and over h2c (prior knowledge).
#
# Flow:
#   1. h2spec: $H2SPEC, else ../shared/tools/h2spec beside the repository.
#      Absent: say so and exit 0 (a fresh clone without ../shared still
#      passes; the skip is printed, never silent).
#   2. servery: $SERVERY_BIN, else target/release/servery (built if missing).
#   3. Start `servery serve ROOT --bind 127.0.0.1:0 --tls-bind 127.0.0.1:0
#      --tls-self-signed --no-pin` with a non-empty index (h2spec expects a
#      200 with a body for GET /), ports read back from the ready line.
#   4. Run h2spec against the TLS port (-t -k) and the plain port, print each
#      summary, keep the JUnit reports under --out DIR if given.
#   5. Stop the server (trap, on any exit).
#
# Exit status: 0 every case passed both ways (or h2spec is absent); 1 a case
# failed; 2 servery could not start.
# Flags after -- go to 'servery serve' (e.g. -- --driver epoll).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [--out DIR] [--strict] [-- SERVE_FLAGS...]
Runs h2spec against servery over TLS and h2c; fails on any failed case.
  --out DIR   keep the full reports (h2spec-tls.txt/.xml, h2spec-h2c.txt/.xml)
  --strict    also run h2spec's SHOULD-level cases (--strict)
Environment: H2SPEC (default ../shared/tools/h2spec), SERVERY_BIN
(default target/release/servery, built if missing).
USAGE
}

out=""
strict=()
serve_flags=()
while (($#)); do
	case $1 in
	--out)
		need_value "$1" "${2:-}"
		out=$2
		shift
		;;
	--strict) strict=(--strict) ;;
	-h | --help)
		usage
		exit 0
		;;
	--)
		shift
		serve_flags=("$@")
		break
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
	shift
done

h2spec=${H2SPEC:-$repo/../shared/tools/h2spec}
if [[ ! -x $h2spec ]]; then
	log "SKIPPED: no h2spec at $h2spec (set H2SPEC, or see ../shared/tools/README.md)"
	exit 0
fi

bin=${SERVERY_BIN:-$repo/target/release/servery}
if [[ ! -x $bin ]]; then
	[[ -z ${SERVERY_BIN:-} ]] || die "SERVERY_BIN=$bin is not an executable"
	log "building $bin"
	(cd "$repo" && cargo build --release --bin servery) || die "cannot build servery"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/servery-h2spec.XXXXXX")
server_pid=
cleanup() {
	if [[ -n $server_pid ]]; then
		stop_pid "$server_pid" 5 || true
	fi
	rm -rf -- "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/root"
printf 'hello over HTTP/2\n' >"$work/root/index.html"
"$bin" serve "$work/root" --bind 127.0.0.1:0 --tls-bind 127.0.0.1:0 --tls-self-signed --no-pin \
	"${serve_flags[@]}" >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
if ! wait_line "$work/stdout" '^servery: ready on ' 10 "$server_pid"; then
	cat "$work/stderr" >&2
	log "servery did not become ready ($bin)"
	exit 2
fi
ready=$(grep -m1 -E '^servery: ready on ' "$work/stdout")
plain=${ready#*http://}
plain=${plain%% *}
tls=${ready#*https://}
tls=${tls%% *}
printf '%s\n' "$ready"
printf 'h2spec %s, servery %s (tree at %s)\n' \
	"$("$h2spec" --version 2>/dev/null | head -1 || echo '?')" "$bin" \
	"$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"

failed=0
# run NAME ADDR FLAGS...: one h2spec run, its summary printed.
run() {
	local name=$1 addr=$2
	shift 2
	local port=${addr##*:}
	local status=0
	timeout 600 "$h2spec" -h 127.0.0.1 -p "$port" -o 5 "${strict[@]}" -j "$work/h2spec-$name.xml" "$@" \
		>"$work/h2spec-$name.txt" 2>&1 || status=$?
	printf '%-4s %s: %s\n' "$name" "$addr" "$(tail -n 1 "$work/h2spec-$name.txt")"
	if ((status != 0)); then
		grep -E '×' -A 5 "$work/h2spec-$name.txt" | head -60 >&2 || true
		failed=1
	fi
	if [[ -n $out ]]; then
		mkdir -p "$out"
		cp "$work/h2spec-$name.txt" "$work/h2spec-$name.xml" "$out/"
	fi
}
run tls "$tls" -t -k
run h2c "$plain"
exit "$failed"
