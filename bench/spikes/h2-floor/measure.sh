#!/bin/bash
# measure.sh ROUNDS [SERVERS]: the h2-floor spike against servery and h2o, interleaved.
# Each server is pinned to CPU 0 with one worker, h2load to CPU 1
# (`-c 8 -m 8 -t 1`: 64 concurrent streams, TLS 1.3, ALPN h2, a 1 KiB file),
# 2 s of warm-up load, then 5 s measured; server user/sys CPU from /proc,
# h2load's own CPU from time(1). Build first: `cargo build --release` here and
# `cargo build --release --bin servery` at the top. Needs h2load, h2o, openssl.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
rounds=${1:-3}
servers=${2:-floor servery h2o}
work=$(mktemp -d)
trap 'kill "${PID:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
# shellcheck source=/dev/null
source "$top/scripts/lib/common.sh"
# shellcheck source=/dev/null
source "$top/scripts/lib/h2o.sh"
mkdir -p "$work/root"
head -c 1024 /dev/urandom >"$work/root/1k.bin"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=localhost \
	-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=https://127.0.0.1:$port/1k.bin
cpu() { # user and system ticks of every thread of the given pids
	local u=0 k=0 a b p s
	for p in "$@"; do for s in /proc/"$p"/task/*/stat; do
		read -r a b < <(awk '{print $14" "$15}' "$s"); u=$((u + a)); k=$((k + b))
	done; done
	echo "$u $k"
}
start() {
	case $1 in
	floor) taskset -c 0 "$here/target/release/h2-floor" "$port" "$work/cert.pem" "$work/key.pem" >/dev/null & PID=$! ;;
	servery) taskset -c 0 "$top/target/release/servery" serve "$work/root" --tls-bind "127.0.0.1:$port" \
		--tls-cert "$work/cert.pem" --tls-key "$work/key.pem" --workers 1 --cpus 0 >/dev/null 2>&1 & PID=$! ;;
	h2o) write_h2o_conf "$work/h2o" "$work/root" "$port" 1 h2 "$work/cert.pem" "$work/key.pem"
		taskset -c 0 h2o -c "$work/h2o/h2o.conf" >/dev/null 2>&1 & PID=$! ;;
	esac
	for _ in $(seq 50); do curl -sk --http2 -o /dev/null "$url" && return; sleep 0.1; done
	die "$1 did not answer on $url"
}
for _ in $(seq "$rounds"); do for s in $servers; do
	start "$s"
	taskset -c 1 h2load -c 8 -m 8 -t 1 -D 2 "$url" >/dev/null 2>&1
	# shellcheck disable=SC2046
	pids="$PID $( (pgrep -P "$PID" || true) | tr "\n" " ")"
	read -r u0 k0 < <(cpu $pids)
	out=$(taskset -c 1 /usr/bin/time -f "client %U %S %e" h2load -c 8 -m 8 -t 1 -D 5 "$url" 2>&1)
	read -r u1 k1 < <(cpu $pids)
	n=$(awk '/^requests:/{print $8}' <<<"$out")
	rps=$(awk '/^finished in/{print $4}' <<<"$out")
	busy=$(awk '/^client/{printf "%.0f%%", 100*($2+$3)/$4}' <<<"$out")
	tick=$(getconf CLK_TCK)
	awk -v s="$s" -v rps="$rps" -v n="$n" -v busy="$busy" -v u=$((u1 - u0)) -v k=$((k1 - k0)) -v t="$tick" \
		'BEGIN { f = 1e6 / t / n; printf "%-8s %9.0f req/s  user %.2f  sys %.2f  total %.2f us/req  h2load busy %s\n", s, rps, u*f, k*f, (u+k)*f, busy }'
	kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
	sleep 0.5
done; done
