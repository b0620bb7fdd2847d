#!/usr/bin/env bash
# Idle TLS: the memory an idle keep-alive TLS 1.3 connection costs servery,
# nginx and h2o, over HTTP/1.1 and HTTP/2, in one run, interleaved by trial.
#
# Flow:
#   1. Parse options; check tools; find nginx and h2o (a SKIPPED line for
#      each one not installed); build servery (cargo build --release) if the
#      binary is missing; raise the fd limit the servers inherit.
#   2. Make a temp docroot with a random 1k.bin and one ECDSA P-256
#      self-signed certificate for all three servers (as scripts/bench-quick.sh
#      --tls makes it); record identity (command, commit, machine, kernel,
#      each server's version and sha256).
#   3. For each trial, for each protocol (h1, h2), for each server in turn
#      (servery nginx h2o servery nginx h2o ..., never two at once), start a
#      fresh server: one worker, pinned to --server-cpu with taskset (and
#      servery's --cpus, nginx's worker_cpu_affinity), TLS on a free port of
#      127.0.0.1, a connection limit of at least --conns. Run idle_tls.py idle
#      pinned to --client-cpu: one warm-up GET, RSS of the server's process
#      tree, --conns connections each doing one GET of 1k.bin over TLS 1.3
#      (ALPN http/1.1 or h2) and kept open, --settle s, RSS again, every
#      connection checked still open: (after - before) / conns. Stop it.
#   4. Print medians per server and protocol and every trial (markdown);
#      write them with every raw sample and the identity to the JSON file.
#
# Each server has one config for both protocols (it offers h2 and http/1.1
# by ALPN); the client's ALPN picks the protocol. nginx and h2o configs come
# from scripts/lib/nginx.sh and scripts/lib/h2o.sh (protocol h2: TLS 1.2 and
# 1.3, ALPN h2 and http/1.1); the client allows TLS 1.3 only. nginx and h2o
# come from scripts/install-peers.sh.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib/common.sh
. "$repo/scripts/lib/common.sh"
# shellcheck source=../../scripts/lib/nginx.sh
. "$repo/scripts/lib/nginx.sh"
# shellcheck source=../../scripts/lib/h2o.sh
. "$repo/scripts/lib/h2o.sh"
helper=$here/idle_tls.py

usage() {
	cat <<USAGE
usage: ${0##*/} [options]

Measures the memory an idle keep-alive TLS 1.3 connection costs servery,
nginx and h2o (one worker each, pinned), after one GET of a 1 KiB file, over
HTTP/1.1 and HTTP/2, interleaved by trial.

  --trials N          trials per server and protocol           (default 3)
  --conns N           idle TLS connections per trial           (default 2000)
  --settle S          seconds between the last connection and
                      the second RSS read                      (default 2)
  --proto P           h1, h2 or both                           (default both)
  --only NAME         run one server: servery, nginx or h2o
  --server-cpu N      CPU for the server                       (default 0)
  --client-cpu N      CPU for the client                       (default 1)
  --servery-bin PATH  servery to measure (default: target/release/servery,
                      built with cargo build --release if missing)
  --json FILE         where to write results
                      (default bench/results/idle-tls-<UTC time>.json)
  -h, --help          this text

Output: SKIPPED lines for servers not installed, a table of medians per
server and protocol (bytes per idle connection: the growth of the VmRSS sum
over the server's process tree divided by --conns) and one row per trial;
the JSON file has the same plus every raw sample (per-process VmRSS,
RssAnon, RssFile before and after), the command line, machine, kernel, git
commit and each server's version and sha256.
USAGE
}

trials=3
conns=2000
settle=2
proto=both
only=""
server_cpu=0
client_cpu=1
servery_bin=""
json_out=""

argv=("$@")
while (($#)); do
	case $1 in
	--trials | --conns | --settle | --proto | --only | --server-cpu | --client-cpu | --servery-bin | --json)
		need_value "$1" "${2:-}"
		;;&
	--trials) need_uint "$1" "$2" 1 && trials=$2 && shift ;;
	--conns) need_uint "$1" "$2" 1 && conns=$2 && shift ;;
	--settle) need_uint "$1" "$2" 0 && settle=$2 && shift ;;
	--proto)
		[[ $2 == h1 || $2 == h2 || $2 == both ]] || die "--proto wants h1, h2 or both, got '$2'"
		proto=$2
		shift
		;;
	--only)
		[[ $2 == servery || $2 == nginx || $2 == h2o ]] || die "--only wants servery, nginx or h2o, got '$2'"
		only=$2
		shift
		;;
	--server-cpu) need_uint "$1" "$2" 0 && server_cpu=$2 && shift ;;
	--client-cpu) need_uint "$1" "$2" 0 && client_cpu=$2 && shift ;;
	--servery-bin) servery_bin=$2 && shift ;;
	--json) json_out=$2 && shift ;;
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

protos=(h1 h2)
[[ $proto != both ]] && protos=("$proto")
servers=(servery nginx h2o)
[[ -n $only ]] && servers=("$only")

# --- 1. tools, binaries, limits ----------------------------------------------

need_cmd python3 "install Python 3"
need_cmd taskset "install util-linux"
need_cmd openssl "install openssl"
for cpu in "$server_cpu" "$client_cpu"; do
	taskset -c "$cpu" true 2>/dev/null ||
		die "cannot run on CPU $cpu here (taskset -c $cpu failed); pick --server-cpu/--client-cpu from: $(taskset -cp $$ | sed 's/.*: //')"
done
((server_cpu != client_cpu)) || die "--server-cpu and --client-cpu must differ"

# find_peer NAME SBIN_PATH: print NAME's path, or nothing if not installed.
find_peer() {
	local bin
	bin=$(command -v "$1" || true)
	[[ -z $bin && -x $2 ]] && bin=$2
	printf '%s\n' "$bin"
}

skipped=()
nginx_bin=""
h2o_bin=""
kept=()
for server in "${servers[@]}"; do
	case $server in
	nginx)
		nginx_bin=$(find_peer nginx /usr/sbin/nginx)
		if [[ -n $nginx_bin ]]; then
			kept+=(nginx)
		else
			skipped+=("nginx: not installed (run scripts/install-peers.sh)")
		fi
		;;
	h2o)
		h2o_bin=$(find_peer h2o /usr/sbin/h2o)
		if [[ -n $h2o_bin ]]; then
			kept+=(h2o)
		else
			skipped+=("h2o: not installed (run scripts/install-peers.sh)")
		fi
		;;
	*) kept+=("$server") ;;
	esac
done
for line in "${skipped[@]}"; do
	log "SKIPPED: $line"
done
((${#kept[@]})) || die "no server left to measure"
servers=("${kept[@]}")

if [[ " ${servers[*]} " == *" servery "* ]]; then
	if [[ -z $servery_bin ]]; then
		servery_bin=${CARGO_TARGET_DIR:-$repo/target}/release/servery
		if [[ ! -x $servery_bin ]]; then
			need_cmd cargo "install Rust (https://rustup.rs) or pass --servery-bin"
			log "building servery (cargo build --release --bin servery)"
			(cd "$repo" && cargo build --release --bin servery) >&2 || die "cargo build failed"
		fi
	fi
	[[ -f $servery_bin && -x $servery_bin ]] || die "--servery-bin '$servery_bin' is not an executable file"
	servery_bin=$(cd "$(dirname "$servery_bin")" && pwd)/$(basename "$servery_bin")
	# Its per-worker connection limit, as its --help documents it.
	servery_max_default=$("$servery_bin" serve --help 2>/dev/null |
		sed -n '/--max-connections/,/default:/ s/.*\[default: \([0-9]*\)\].*/\1/p' | head -n1)
	[[ $servery_max_default =~ ^[0-9]+$ ]] ||
		die "cannot read --max-connections' default from '$servery_bin serve --help'"
else
	servery_bin=""
fi

# Every server holds --conns connections plus its listeners, files and
# logs; the client holds --conns sockets (it raises its own soft limit, up to
# this shell's hard limit, which the servers inherit too).
want_fds=$((conns + 256))
soft=$(ulimit -n)
if [[ $soft != unlimited ]] && ((soft < want_fds)); then
	hard=$(ulimit -Hn)
	if [[ $hard != unlimited ]] && ((hard < want_fds)); then
		die "need $want_fds open files for --conns $conns but the hard limit is $hard (ulimit -Hn)"
	fi
	ulimit -n "$want_fds" || die "ulimit -n $want_fds failed"
fi
# Connection limits: each server's own default, raised where --conns (plus
# the warm-up connection and slack) would pass it.
servery_max=""
if [[ -n $servery_bin ]]; then
	servery_max=$((conns + 16 > servery_max_default ? conns + 16 : servery_max_default))
fi
peer_max=$((conns + 256 > 4096 ? conns + 256 : 4096))

if [[ -z $json_out ]]; then
	json_out=$repo/bench/results/idle-tls-$(date -u +%Y%m%dT%H%M%SZ).json
fi
mkdir -p "$(dirname "$json_out")"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/idle-tls.XXXXXX")
server_pid=""
client_pid=""
trap bench_cleanup EXIT
trap 'log "interrupted (SIGINT); cleaning up"; exit 130' INT
trap 'log "terminated (SIGTERM); cleaning up"; exit 143' TERM

# --- 2. docroot, certificate, identity ---------------------------------------

docroot=$tmp/docroot
mkdir -p "$docroot"
chmod 755 "$tmp" "$docroot"
# Random bytes: nothing can be compressed on the way.
head -c 1024 /dev/urandom >"$docroot/1k.bin"
# One ECDSA P-256 certificate for all servers, as bench-quick.sh --tls.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	-keyout "$tmp/tls.key" -out "$tmp/tls.crt" -days 2 -subj /CN=localhost \
	-addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null ||
	die "openssl could not make the benchmark certificate"

command_line=$(printf '%q ' "$0" "${argv[@]}")
command_line=${command_line% }
settings=$(python3 -c 'import json, sys
a = sys.argv[1:]
print(json.dumps({
    "trials": int(a[0]), "conns": int(a[1]), "settle_s": int(a[2]),
    "protos": a[3].split(), "servers": a[4].split(), "size_bytes": 1024,
    "server_cpu": int(a[5]), "client_cpu": int(a[6]),
    "connection_limits": {"servery_max_connections": int(a[7]) if a[7] else None,
                          "nginx_worker_connections": int(a[8]),
                          "h2o_max_connections": int(a[8])},
    "open_files_limit": a[9],
    "certificate": "ECDSA P-256, self-signed, CN=localhost, SAN localhost and 127.0.0.1",
    "client": "TLS 1.3 only; ALPN http/1.1 (h1) or h2 (h2); one GET of /1k.bin per connection",
    "order": "for each trial, for each proto, each server in turn, a fresh server each time",
}))' "$trials" "$conns" "$settle" "${protos[*]}" "${servers[*]}" "$server_cpu" "$client_cpu" \
	"$servery_max" "$peer_max" "$(ulimit -n)")
meta_args=(--repo "$repo" --command "$command_line" --nproc "$(nproc)" --settings "$settings")
[[ -n $servery_bin ]] && meta_args+=(--server "servery=$servery_bin")
[[ -n $nginx_bin ]] && meta_args+=(--server "nginx=$nginx_bin")
[[ -n $h2o_bin ]] && meta_args+=(--server "h2o=$h2o_bin")
for line in "${skipped[@]}"; do
	meta_args+=(--skipped "$line")
done
python3 "$helper" meta "${meta_args[@]}" >"$tmp/meta.json"
samples=$tmp/samples.jsonl
: >"$samples"

# --- 3. servers and trials ---------------------------------------------------

# start_server NAME PORT: start NAME with TLS on 127.0.0.1:PORT serving
# $docroot, pinned to $server_cpu; set server_pid, or die with its log.
start_server() {
	local name=$1 port=$2 log=$tmp/$1-$2.log prefix
	case $name in
	servery)
		# taskset pins the whole process (supervisor too); --cpus pins the
		# worker. --tls-bind alone: no cleartext listener.
		taskset -c "$server_cpu" "$servery_bin" serve "$docroot" \
			--tls-bind "127.0.0.1:$port" --tls-cert "$tmp/tls.crt" --tls-key "$tmp/tls.key" \
			--workers 1 --cpus "$server_cpu" --max-connections "$servery_max" >"$log" 2>&1 &
		server_pid=$!
		if ! wait_line "$log" 'ready on' 30 "$server_pid"; then
			sed 's/^/  | /' "$log" >&2
			kill -0 "$server_pid" 2>/dev/null || die "servery exited before its ready line (log above)"
			die "servery did not print its ready line within 30 s (log above)"
		fi
		;;
	nginx)
		prefix=$tmp/nginx-$port
		write_nginx_conf "$prefix" "$docroot" "$port" 1 "$server_cpu" h2 "$tmp/tls.crt" "$tmp/tls.key"
		sed -i -e "s/^\(    worker_connections\) [0-9]*;/\1 $peer_max;/" \
			-e "s/^worker_processes .*/&\nworker_rlimit_nofile $want_fds;/" "$prefix/nginx.conf"
		if ! grep -q "worker_connections $peer_max;" "$prefix/nginx.conf" ||
			! grep -q "^worker_rlimit_nofile $want_fds;" "$prefix/nginx.conf"; then
			die "could not set the connection limits in $prefix/nginx.conf"
		fi
		nginx_args "$prefix"
		taskset -c "$server_cpu" "$nginx_bin" "${NGINX_ARGS[@]}" >"$log" 2>&1 &
		server_pid=$!
		log=$prefix/error.log
		;;
	h2o)
		prefix=$tmp/h2o-$port
		write_h2o_conf "$prefix" "$docroot" "$port" 1 h2 "$tmp/tls.crt" "$tmp/tls.key"
		# http2-idle-timeout defaults to 10 s in h2o 2.2: longer than it
		# takes to open the connections is not guaranteed; 75 s, as its
		# HTTP/1.1 timeout and nginx's keepalive_timeout.
		sed -i -e "s/^max-connections: [0-9]*/max-connections: $peer_max/" \
			-e "s/^http1-request-timeout: .*/&\nhttp2-idle-timeout: 75/" "$prefix/h2o.conf"
		if ! grep -q "^max-connections: $peer_max\$" "$prefix/h2o.conf" ||
			! grep -q "^http2-idle-timeout: 75\$" "$prefix/h2o.conf"; then
			die "could not set the connection limit and idle timeout in $prefix/h2o.conf"
		fi
		h2o_args "$prefix"
		taskset -c "$server_cpu" "$h2o_bin" "${H2O_ARGS[@]}" >"$log" 2>&1 &
		server_pid=$!
		;;
	esac
	if ! wait_tcp 127.0.0.1 "$port" 30 "$server_pid"; then
		sed 's/^/  | /' "$log" >&2 2>/dev/null || true
		die "$name did not accept connections on port $port within 30 s"
	fi
}

# stop_server NAME: SIGTERM the server, warn unless it exits 0.
stop_server() {
	local status=0
	stop_pid "$server_pid" 15 || status=$?
	server_pid=""
	((status == 0)) || warn "$1 exited with status $status after SIGTERM"
}

# idle_trial SERVER PROTO TRIAL: one idle-memory sample.
idle_trial() {
	local server=$1 proto=$2 trial=$3 port out
	port=$(free_port)
	start_server "$server" "$port"
	out=$tmp/idle-$server-$proto-$trial.json
	taskset -c "$client_cpu" python3 "$helper" idle --pid "$server_pid" --port "$port" \
		--proto "$proto" --path /1k.bin --file "$docroot/1k.bin" --cafile "$tmp/tls.crt" \
		--conns "$conns" --settle "$settle" --server "$server" --trial "$trial" >"$out" &
	client_pid=$!
	wait "$client_pid" || die "idle client failed against $server ($proto)"
	client_pid=""
	stop_server "$server"
	cat "$out" >>"$samples"
	log "  $proto $server: $(python3 "$helper" summary "$out")"
}

for ((trial = 1; trial <= trials; trial++)); do
	log "trial $trial/$trials"
	for p in "${protos[@]}"; do
		for server in "${servers[@]}"; do
			idle_trial "$server" "$p" "$trial"
		done
	done
done

# --- 4. report ---------------------------------------------------------------

python3 "$helper" report --meta "$tmp/meta.json" --samples "$samples" --out "$json_out"
echo
echo "results: $json_out"
