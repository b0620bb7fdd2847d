#!/usr/bin/env bash
# Quick benchmark: servery against nginx, one worker each on one pinned CPU,
# wrk on another CPU, keep-alive, the same file from the same temp docroot.
#
# Flow:
#   1. Parse options, check tools, build target/release-lto/servery (the
#      measured profile: fat LTO, one codegen unit) if it is missing or older
#      than the sources.
#   2. Make a temp docroot with one random file per case, record machine and
#      software identity.
#   3. For each case, for each trial, for each server in turn (A B A B, never
#      two servers at once): start the server, check one response byte for
#      byte, warm up, read the server's CPU ticks, run wrk, read them again,
#      stop the server.
#   4. Print medians and servery/nginx ratios; write them with every raw
#      sample (wrk's own output included) to a JSON file.
#
# A case is a file size, a connection count and a metric kind: "rps"
# (req/s, p99, CPU µs per request) or "throughput" (MB/s, p99, CPU seconds
# per GB). Add a case by adding a line to the cases array below.
#
# Run scripts/install-peers.sh first for nginx and wrk.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"
# shellcheck source=lib/nginx.sh
. "$here/lib/nginx.sh"
report_py=$here/lib/bench_report.py

usage() {
	cat <<USAGE
usage: ${0##*/} [options]

Benchmarks servery against nginx (one worker each, pinned) with wrk.

  --duration S        seconds per measured trial              (default 10)
  --trials N          measured trials per server and case     (default 3)
  --warmup S          unmeasured wrk run after each start; 0 = none (default 3)
  --connections N     connections for the small-file case     (default 64)
  --size BYTES        file size for the small-file case       (default 1024)
  --server-cpu N      CPU for the server (worker and master)  (default 0)
  --client-cpu N      CPU for wrk                             (default 1)
  --only NAME         run one server: servery or nginx
  --tls               add TLS cases (an ECDSA P-256 certificate shared by both
                      servers): 1 KiB at 64 connections and 8 MiB at 16
  --large             add the large-file cases: 8 MiB at 16 connections
                      and 100 MiB at 4, reported as MB/s and CPU s/GB
  --json FILE         where to write results
                      (default bench/results/quick-<UTC time>.json)
  --servery-bin PATH  use this binary; do not build
  -h, --help          this text

Output: a table of medians per case and server (req/s or MB/s, p99 latency,
server CPU per request or per GB, server and wrk CPU use, errors) and the
servery/nginx ratios; the JSON file has the same plus every raw trial.
USAGE
}

duration=10
trials=3
warmup=3
connections=64
size=1024
server_cpu=0
client_cpu=1
only=""
large=0
tls=0
json_out=""
servery_bin=""

argv=("$@")
while (($#)); do
	case $1 in
	--duration | --trials | --warmup | --connections | --size | --server-cpu | --client-cpu | --only | --json | --servery-bin)
		need_value "$1" "${2:-}"
		;;&
	--duration) need_uint "$1" "$2" 1 && duration=$2 && shift ;;
	--trials) need_uint "$1" "$2" 1 && trials=$2 && shift ;;
	--warmup) need_uint "$1" "$2" 0 && warmup=$2 && shift ;;
	--connections) need_uint "$1" "$2" 1 && connections=$2 && shift ;;
	--size) need_uint "$1" "$2" 1 && size=$2 && shift ;;
	--server-cpu) need_uint "$1" "$2" 0 && server_cpu=$2 && shift ;;
	--client-cpu) need_uint "$1" "$2" 0 && client_cpu=$2 && shift ;;
	--only)
		[[ $2 == servery || $2 == nginx ]] || die "--only wants servery or nginx, got '$2'"
		only=$2
		shift
		;;
	--large) large=1 ;;
	--json) json_out=$2 && shift ;;
	--tls) tls=1 ;;
	--servery-bin) servery_bin=$2 && shift ;;
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

# Cases, run in this order: name:size_bytes:connections:metric[:tls].
cases=("small:$size:$connections:rps")
if ((tls)); then
	cases+=(
		"small-tls:$size:$connections:rps:tls"
		"large-8m-tls:$((8 << 20)):16:throughput:tls"
	)
fi
if ((large)); then
	cases+=(
		"large-8m:$((8 << 20)):16:throughput"
		"large-100m:$((100 << 20)):4:throughput"
	)
fi

servers=(servery nginx)
[[ -n $only ]] && servers=("$only")

# --- 1. tools and binaries -------------------------------------------------

need_cmd python3 "install Python 3"
need_cmd taskset "install util-linux"
ncpu=$(nproc)
for cpu in "$server_cpu" "$client_cpu"; do
	taskset -c "$cpu" true 2>/dev/null ||
		die "cannot run on CPU $cpu here (taskset -c $cpu failed); pick --server-cpu/--client-cpu from: $(taskset -cp $$ | sed 's/.*: //')"
done
((server_cpu != client_cpu)) || warn "server and wrk share CPU $server_cpu; results will mix"
need_cmd curl "install curl (apt-get install curl)"
need_cmd wrk "run scripts/install-peers.sh"
wrk_bin=$(command -v wrk)
nginx_bin=""
if [[ " ${servers[*]} " == *" nginx "* ]]; then
	nginx_bin=$(command -v nginx || true)
	[[ -z $nginx_bin && -x /usr/sbin/nginx ]] && nginx_bin=/usr/sbin/nginx
	[[ -n $nginx_bin ]] || die "'nginx' not found; run scripts/install-peers.sh"
fi

if [[ " ${servers[*]} " == *" servery "* ]]; then
	if [[ -n $servery_bin ]]; then
		[[ -x $servery_bin ]] || die "--servery-bin '$servery_bin' is not an executable"
	else
		servery_bin=${CARGO_TARGET_DIR:-$repo/target}/release-lto/servery
		stale=""
		if [[ -x $servery_bin ]]; then
			stale=$(find "$repo/src" "$repo/Cargo.toml" "$repo/Cargo.lock" \
				-newer "$servery_bin" -print -quit 2>/dev/null || true)
		fi
		if [[ ! -x $servery_bin || -n $stale ]]; then
			need_cmd cargo "install Rust (https://rustup.rs) to build servery"
			log "building servery (cargo build --profile release-lto --bin servery)"
			(cd "$repo" && cargo build --profile release-lto --bin servery) >&2 ||
				die "cargo build failed"
			[[ -x $servery_bin ]] || die "cargo build made no $servery_bin"
		fi
	fi
	servery_bin=$(cd "$(dirname "$servery_bin")" && pwd)/$(basename "$servery_bin")
fi

if [[ -z $json_out ]]; then
	json_out=$repo/bench/results/quick-$(date -u +%Y%m%dT%H%M%SZ).json
fi
mkdir -p "$(dirname "$json_out")"

# --- cleanup ---------------------------------------------------------------

tmp=$(mktemp -d "${TMPDIR:-/tmp}/servery-bench.XXXXXX")
server_pid=""
client_pid=""
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 2. docroot and identity -----------------------------------------------

docroot=$tmp/docroot
mkdir -p "$docroot"
chmod 755 "$tmp" "$docroot"
for c in "${cases[@]}"; do
	IFS=: read -r name bytes _ _ _ <<<"$c"
	# Random bytes: nothing can be compressed or deduplicated on the way.
	head -c "$bytes" /dev/urandom >"$docroot/$name.bin"
done
if ((tls)); then
	need_cmd openssl "install openssl"
	# One ECDSA P-256 certificate for both servers (nginx's and ours).
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$tmp/tls.key" -out "$tmp/tls.crt" -days 2 -subj /CN=localhost \
		-addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null ||
		die "openssl could not make the benchmark certificate"
fi

clk_tck=$(getconf CLK_TCK)
command_line=$(printf '%q ' "$0" "${argv[@]}")
command_line=${command_line% }
options=$(python3 -c 'import json, sys
k = ["duration_s", "trials", "warmup_s", "connections", "size_bytes",
     "server_cpu", "client_cpu", "only", "large", "servers", "cases"]
v = sys.argv[1:]
d = dict(zip(k, v))
for key in k[:7]:
    d[key] = int(d[key])
d["only"] = d["only"] or None
d["large"] = d["large"] == "1"
d["servers"] = d["servers"].split()
d["cases"] = [dict(zip(["name", "size_bytes", "connections", "metric"], c.split(":")))
              for c in d["cases"].split()]
for c in d["cases"]:
    c["size_bytes"] = int(c["size_bytes"]); c["connections"] = int(c["connections"])
print(json.dumps(d))' "$duration" "$trials" "$warmup" "$connections" "$size" \
	"$server_cpu" "$client_cpu" "$only" "$large" "${servers[*]}" "${cases[*]}")

meta_args=(--repo "$repo" --command "$command_line" --options "$options"
	--nproc "$ncpu" --clk-tck "$clk_tck" --wrk-bin "$wrk_bin")
[[ -n $servery_bin ]] && meta_args+=(--servery-bin "$servery_bin")
[[ -n $nginx_bin ]] && meta_args+=(--nginx-bin "$nginx_bin")
python3 "$report_py" meta "${meta_args[@]}" >"$tmp/meta.json"
samples=$tmp/samples.jsonl
: >"$samples"

# --- 3. servers and trials -------------------------------------------------

# start_server NAME PORT: start NAME on 127.0.0.1:PORT serving $docroot,
# pinned to $server_cpu; set server_pid, ready_line and config_file (empty
# if the server has none), or die with its log.
start_server() {
	local name=$1 port=$2 use_tls=${3:-} log=$tmp/$1-$2.log
	local listen_flags=(--bind "127.0.0.1:$port")
	[[ -n $use_tls ]] && listen_flags=(--tls-bind "127.0.0.1:$port" --tls-cert "$tmp/tls.crt" --tls-key "$tmp/tls.key")
	ready_line=""
	config_file=""
	case $name in
	servery)
		# taskset pins the whole process (supervisor too); --cpus pins the
		# worker, so both servers get exactly one CPU.
		taskset -c "$server_cpu" "$servery_bin" serve "$docroot" \
			"${listen_flags[@]}" --workers 1 --cpus "$server_cpu" \
			--driver auto >"$log" 2>&1 &
		server_pid=$!
		if ! wait_line "$log" 'ready on' 30 "$server_pid"; then
			sed 's/^/  | /' "$log" >&2
			kill -0 "$server_pid" 2>/dev/null ||
				die "servery exited before its ready line (log above)"
			die "servery did not print its ready line within 30 s (log above)"
		fi
		ready_line=$(grep -m1 -E 'ready on' "$log")
		;;
	nginx)
		local prefix=$tmp/nginx-$port
		write_nginx_conf "$prefix" "$docroot" "$port" 1 "$server_cpu"
		config_file=$prefix/nginx.conf
		if [[ -n $use_tls ]]; then
			# Same certificate, TLS 1.2 and 1.3, tickets on, as servery.
			sed -i "s|listen 127.0.0.1:$port reuseport;|listen 127.0.0.1:$port ssl reuseport;\n        ssl_certificate $tmp/tls.crt;\n        ssl_certificate_key $tmp/tls.key;\n        ssl_protocols TLSv1.2 TLSv1.3;\n        ssl_session_tickets on;|" "$config_file"
			grep -q "ssl_certificate " "$config_file" || die "could not enable TLS in $config_file"
		fi
		nginx_args "$prefix"
		taskset -c "$server_cpu" "$nginx_bin" "${NGINX_ARGS[@]}" >"$log" 2>&1 &
		server_pid=$!
		log=$prefix/error.log
		;;
	esac
	if ! wait_tcp 127.0.0.1 "$port" 30 "$server_pid"; then
		sed 's/^/  | /' "$log" >&2 2>/dev/null || true
		die "$name did not accept connections on port $port within 30 s"
	fi
	[[ -n $ready_line ]] || ready_line="$name listening on 127.0.0.1:$port"
}

# check_response URL_BASE PATH FILE: the server returns 200 and FILE's bytes.
check_response() {
	local base=$1 path=$2 file=$3 code
	code=$(curl -sSk -o "$tmp/check.body" -w '%{http_code}' "$base$path") ||
		die "curl $base$path failed"
	[[ $code == 200 ]] || die "GET $path returned HTTP $code, not 200"
	cmp -s "$tmp/check.body" "$file" || die "GET $path returned bytes that differ from the file"
}

# run_trial CASE_SPEC SERVER TRIAL: one measured trial, one JSON line.
run_trial() {
	local spec=$1 server=$2 trial=$3 name bytes conns metric use_tls port url scheme
	local ticks_before ticks_after client_before pids_before pids_after
	local t0 t1 exit_status=0 wrk_out
	IFS=: read -r name bytes conns metric use_tls <<<"$spec"
	port=$(free_port)
	scheme=http
	[[ -n $use_tls ]] && scheme=https
	url=$scheme://127.0.0.1:$port/$name.bin
	log "case $name, $server, trial $trial/$trials (port $port)"

	start_server "$server" "$port" "$use_tls"
	check_response "$scheme://127.0.0.1:$port" "/$name.bin" "$docroot/$name.bin"

	if ((warmup > 0)); then
		taskset -c "$client_cpu" "$wrk_bin" -t1 -c"$conns" -d"${warmup}s" "$url" >/dev/null &
		client_pid=$!
		wait "$client_pid" || die "warm-up wrk failed"
		client_pid=""
	fi

	wrk_out=$tmp/wrk-$name-$server-$trial.txt
	proc_tree "$server_pid"
	pids_before=${#PROC_TREE[@]}
	cpu_ticks "${PROC_TREE[@]}"
	ticks_before=$CPU_TICKS
	child_cpu_ticks
	client_before=$CHILD_TICKS
	t0=$EPOCHREALTIME
	taskset -c "$client_cpu" "$wrk_bin" -t1 -c"$conns" -d"${duration}s" --latency "$url" >"$wrk_out" &
	client_pid=$!
	wait "$client_pid" || die "wrk failed: $(cat "$wrk_out")"
	client_pid=""
	t1=$EPOCHREALTIME
	child_cpu_ticks
	# Same pids as before plus any new ones; a pid that exited mid-trial
	# reads 0 and is flagged by the pid counts in the sample.
	proc_tree "$server_pid"
	pids_after=${#PROC_TREE[@]}
	cpu_ticks "${PROC_TREE[@]}"
	ticks_after=$CPU_TICKS

	stop_pid "$server_pid" 15 || exit_status=$?
	server_pid=""
	((exit_status == 0)) || warn "$server exited with status $exit_status after SIGTERM"
	((pids_before == pids_after)) ||
		warn "$server had $pids_before processes before the trial and $pids_after after"

	python3 "$report_py" sample --wrk-out "$wrk_out" --case "$name" \
		--metric "$metric" --size "$bytes" --connections "$conns" \
		--server "$server" --trial "$trial" --clk-tck "$clk_tck" \
		--server-ticks-before "$ticks_before" --server-ticks-after "$ticks_after" \
		--client-ticks "$((CHILD_TICKS - client_before))" \
		--wall-s "$(python3 -c 'import sys; print(float(sys.argv[2]) - float(sys.argv[1]))' "$t0" "$t1")" \
		--pids-before "$pids_before" --pids-after "$pids_after" \
		--exit-status "$exit_status" --ready-line "$ready_line" \
		--config-file "$config_file" >>"$samples"
}

for spec in "${cases[@]}"; do
	for ((trial = 1; trial <= trials; trial++)); do
		for server in "${servers[@]}"; do
			run_trial "$spec" "$server" "$trial"
		done
	done
done

# --- 4. report -------------------------------------------------------------

python3 "$report_py" report --meta "$tmp/meta.json" --samples "$samples" --out "$json_out"
echo
echo "results: $json_out"
