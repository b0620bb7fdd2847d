#!/usr/bin/env bash
# Idle reads: compare servery binaries (variants of how an idle keep-alive
# connection reads) on the memory an idle connection costs and on the CPU a
# request costs under keep-alive load, in one run, interleaved.
#
# Flow:
#   1. Parse options and NAME=BIN variants; check tools; raise the fd limit;
#      make a temp docroot with random 1k.bin and 64k.bin; record identity
#      (command, commit, machine, kernel, sha256 of every binary).
#   2. For each trial, for each case, for each variant in turn (A B C A B C,
#      never two servers at once), start a fresh server (one worker, pinned to
#      --server-cpu with taskset and --cpus, --bind 127.0.0.1:0, port read
#      from its ready line), measure, stop it. Cases:
#        idle-1k, idle-64k  idle_reads.py idle (pinned to --client-cpu): one
#                           warm-up request, VmRSS of the server, --conns
#                           keep-alive connections each doing one GET of the
#                           file and reading the whole response, kept open,
#                           sleep 1 s, VmRSS again: (after - before) / conns.
#        load-1k            servery-load, 64 connections, 1 KiB, a 1 s warm-up
#                           run, then --duration s measured; server utime+stime
#                           (/proc/PID/stat, whole process tree) around the
#                           measured run / completed requests = CPU µs/request.
#   3. Print medians per variant and every trial (markdown); write them with
#      every raw sample and the identity to the JSON file.
#
# servery-load is target/release/servery-load (built with
# `cargo build --release -p servery-bench` if missing), or --load-bin.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/lib/common.sh
. "$repo/scripts/lib/common.sh"
helper=$here/idle_reads.py

usage() {
	cat <<USAGE
usage: ${0##*/} [options] NAME=BIN [NAME=BIN ...]

Compares servery binaries on idle memory per keep-alive connection (1 KiB and
64 KiB responses) and server CPU per request under keep-alive load, one
variant at a time, interleaved, server and client on separate pinned CPUs.

  --trials N          trials per variant and case                (default 3)
  --duration S        measured seconds of each load run          (default 5)
  --conns N           idle keep-alive connections per idle case  (default 2000)
  --load-conns N      connections of the load run                (default 64)
  --warmup S          unmeasured load run before each measured one (default 1)
  --server-cpu N      CPU for the server                         (default 0)
  --client-cpu N      CPU for the clients                        (default 1)
  --load-bin PATH     servery-load to use (default: target/release/servery-load,
                      built with cargo build --release -p servery-bench if missing)
  --json FILE         where to write results
                      (default bench/results/idle-reads-<UTC time>.json)
  -h, --help          this text

NAME is a label ([A-Za-z0-9._-]+), BIN a servery binary run as
  BIN serve DOCROOT --workers 1 --cpus SERVER_CPU --bind 127.0.0.1:0

Output: a table of medians per variant (idle bytes per connection for 1k and
64k, req/s, server CPU µs per request) and one row per trial; the JSON file
has the same plus every raw sample, the command line, machine, kernel, git
commit and the sha256 of each binary.
USAGE
}

trials=3
duration=5
conns=2000
load_conns=64
warmup=1
server_cpu=0
client_cpu=1
load_bin=""
json_out=""
variants=()
bins=()

argv=("$@")
while (($#)); do
	case $1 in
	--trials | --duration | --conns | --load-conns | --warmup | --server-cpu | --client-cpu | --load-bin | --json)
		need_value "$1" "${2:-}"
		;;&
	--trials) need_uint "$1" "$2" 1 && trials=$2 && shift ;;
	--duration) need_uint "$1" "$2" 1 && duration=$2 && shift ;;
	--conns) need_uint "$1" "$2" 1 && conns=$2 && shift ;;
	--load-conns) need_uint "$1" "$2" 1 && load_conns=$2 && shift ;;
	--warmup) need_uint "$1" "$2" 0 && warmup=$2 && shift ;;
	--server-cpu) need_uint "$1" "$2" 0 && server_cpu=$2 && shift ;;
	--client-cpu) need_uint "$1" "$2" 0 && client_cpu=$2 && shift ;;
	--load-bin) load_bin=$2 && shift ;;
	--json) json_out=$2 && shift ;;
	-h | --help)
		usage
		exit 0
		;;
	-*)
		usage >&2
		die "unknown option '$1'"
		;;
	*=*)
		name=${1%%=*}
		bin=${1#*=}
		[[ $name =~ ^[A-Za-z0-9._-]+$ ]] || die "variant name '$name' wants [A-Za-z0-9._-]+"
		[[ " ${variants[*]} " != *" $name "* ]] || die "variant name '$name' given twice"
		[[ -f $bin && -x $bin ]] || die "variant $name: '$bin' is not an executable file"
		variants+=("$name")
		bins+=("$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")")
		;;
	*)
		usage >&2
		die "'$1' is neither an option nor NAME=BIN"
		;;
	esac
	shift
done
((${#variants[@]})) || {
	usage >&2
	die "give at least one NAME=BIN"
}

# --- 1. tools, limits, docroot, identity -------------------------------------

need_cmd python3 "install Python 3"
need_cmd taskset "install util-linux"
for cpu in "$server_cpu" "$client_cpu"; do
	taskset -c "$cpu" true 2>/dev/null ||
		die "cannot run on CPU $cpu here (taskset -c $cpu failed); pick --server-cpu/--client-cpu from: $(taskset -cp $$ | sed 's/.*: //')"
done
((server_cpu != client_cpu)) || die "--server-cpu and --client-cpu must differ"

if [[ -z $load_bin ]]; then
	load_bin=${CARGO_TARGET_DIR:-$repo/target}/release/servery-load
	if [[ ! -x $load_bin ]]; then
		need_cmd cargo "install Rust (https://rustup.rs) or pass --load-bin"
		log "building servery-load (cargo build --release -p servery-bench)"
		(cd "$repo" && cargo build --release -p servery-bench) >&2 || die "cargo build failed"
	fi
fi
[[ -x $load_bin ]] || die "no servery-load at $load_bin"
load_bin=$(cd "$(dirname "$load_bin")" && pwd)/$(basename "$load_bin")

# The idle client holds --conns sockets and the server as many plus its own;
# both inherit this shell's limit.
want_fds=$((conns + 256))
soft=$(ulimit -n)
if [[ $soft != unlimited ]] && ((soft < want_fds)); then
	hard=$(ulimit -Hn)
	if [[ $hard != unlimited ]] && ((hard < want_fds)); then
		die "need $want_fds open files for --conns $conns but the hard limit is $hard"
	fi
	ulimit -n "$want_fds" || die "ulimit -n $want_fds failed"
fi

if [[ -z $json_out ]]; then
	json_out=$repo/bench/results/idle-reads-$(date -u +%Y%m%dT%H%M%SZ).json
fi
mkdir -p "$(dirname "$json_out")"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/idle-reads.XXXXXX")
server_pid=""
client_pid=""
trap bench_cleanup EXIT
trap 'log "interrupted (SIGINT); cleaning up"; exit 130' INT
trap 'log "terminated (SIGTERM); cleaning up"; exit 143' TERM

docroot=$tmp/docroot
mkdir -p "$docroot"
chmod 755 "$tmp" "$docroot"
# Random bytes: nothing can be compressed on the way.
head -c 1024 /dev/urandom >"$docroot/1k.bin"
head -c 65536 /dev/urandom >"$docroot/64k.bin"
sha_1k=$(python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$docroot/1k.bin")

clk_tck=$(getconf CLK_TCK)
command_line=$(printf '%q ' "$0" "${argv[@]}")
command_line=${command_line% }
settings=$(printf '{"trials": %d, "duration_s": %d, "warmup_s": %d, "idle_conns": %d, "settle_s": 1, "load_conns": %d, "load_size_bytes": 1024, "server_cpu": %d, "client_cpu": %d, "server_args": "serve DOCROOT --workers 1 --cpus %d --bind 127.0.0.1:0", "order": "for each trial, for each case (idle-1k, idle-64k, load-1k), each variant in turn, a fresh server each time"}' \
	"$trials" "$duration" "$warmup" "$conns" "$load_conns" "$server_cpu" "$client_cpu" "$server_cpu")
meta_args=(--repo "$repo" --command "$command_line" --nproc "$(nproc)" --clk-tck "$clk_tck"
	--settings "$settings" --load-bin "$load_bin")
for i in "${!variants[@]}"; do
	meta_args+=(--variant "${variants[$i]}=${bins[$i]}")
done
python3 "$helper" meta "${meta_args[@]}" >"$tmp/meta.json"
samples=$tmp/samples.jsonl
: >"$samples"

# --- 2. servers and trials ---------------------------------------------------

# start_server NAME BIN: start BIN pinned to $server_cpu on 127.0.0.1:0; set
# server_pid and port (from the ready line), or die with its log.
start_server() {
	local name=$1 bin=$2 log=$tmp/server-$1.log ready
	# taskset pins the whole process; --cpus pins the worker.
	taskset -c "$server_cpu" "$bin" serve "$docroot" --workers 1 --cpus "$server_cpu" \
		--bind 127.0.0.1:0 >"$log" 2>&1 &
	server_pid=$!
	if ! wait_line "$log" 'ready on http://127\.0\.0\.1:[0-9]+' 30 "$server_pid"; then
		sed 's/^/  | /' "$log" >&2
		kill -0 "$server_pid" 2>/dev/null || die "$name exited before its ready line (log above)"
		die "$name did not print its ready line within 30 s (log above)"
	fi
	ready=$(grep -m1 -oE 'ready on http://127\.0\.0\.1:[0-9]+' "$log")
	port=${ready##*:}
}

# stop_server NAME: SIGTERM the server, warn unless it exits 0.
stop_server() {
	local status=0
	stop_pid "$server_pid" 15 || status=$?
	server_pid=""
	((status == 0)) || warn "$1 exited with status $status after SIGTERM"
}

# idle_trial NAME BIN TRIAL CASE PATH: one idle-memory sample.
idle_trial() {
	local name=$1 bin=$2 trial=$3 case=$4 path=$5 out
	start_server "$name" "$bin"
	out=$tmp/idle-$name-$trial-$case.json
	taskset -c "$client_cpu" python3 "$helper" idle --pid "$server_pid" --port "$port" \
		--path "$path" --file "$docroot$path" --conns "$conns" --settle 1 \
		--variant "$name" --trial "$trial" --case "$case" >"$out" &
	client_pid=$!
	wait "$client_pid" || die "idle client failed against $name ($case)"
	client_pid=""
	stop_server "$name"
	cat "$out" >>"$samples"
	log "  $case $name: $(python3 "$helper" summary "$out")"
}

# load_trial NAME BIN TRIAL: one CPU-per-request sample.
load_trial() {
	local name=$1 bin=$2 trial=$3 url out ticks_before ticks_after pids_before pids_after
	local client_before t0 t1
	start_server "$name" "$bin"
	url=http://127.0.0.1:$port/1k.bin
	out=$tmp/load-$name-$trial.json
	# Warm-up on its own connections, after servery-load's response check
	# (status 200 and the file's SHA-256), so a broken variant fails here.
	if ((warmup > 0)); then
		taskset -c "$client_cpu" "$load_bin" -t 1 -c "$load_conns" --cpus "$client_cpu" \
			-d "${warmup}s" --warmup 0 --expect-sha256 "$sha_1k" --quiet --json "$tmp/warm.json" "$url" &
	else
		taskset -c "$client_cpu" "$load_bin" validate --expect-sha256 "$sha_1k" "$url" >/dev/null &
	fi
	client_pid=$!
	wait "$client_pid" || die "servery-load warm-up failed against $name"
	client_pid=""

	# /proc/stat around the window shows what else ran on the two CPUs.
	cat /proc/stat >"$tmp/stat-before"
	proc_tree "$server_pid"
	pids_before=${#PROC_TREE[@]}
	cpu_ticks "${PROC_TREE[@]}"
	ticks_before=$CPU_TICKS
	child_cpu_ticks
	client_before=$CHILD_TICKS
	t0=$EPOCHREALTIME
	taskset -c "$client_cpu" "$load_bin" -t 1 -c "$load_conns" --cpus "$client_cpu" \
		-d "${duration}s" --warmup 0 --no-validate --quiet --json "$out" "$url" &
	client_pid=$!
	wait "$client_pid" || die "servery-load failed against $name"
	client_pid=""
	t1=$EPOCHREALTIME
	child_cpu_ticks
	proc_tree "$server_pid"
	pids_after=${#PROC_TREE[@]}
	cpu_ticks "${PROC_TREE[@]}"
	ticks_after=$CPU_TICKS
	cat /proc/stat >"$tmp/stat-after"
	stop_server "$name"
	((pids_before == pids_after)) ||
		warn "$name had $pids_before processes before the load run and $pids_after after"

	python3 "$helper" load --report "$out" --variant "$name" --trial "$trial" \
		--ticks-before "$ticks_before" --ticks-after "$ticks_after" \
		--client-ticks "$((CHILD_TICKS - client_before))" --clk-tck "$clk_tck" \
		--wall-s "$(python3 -c 'import sys; print(float(sys.argv[2]) - float(sys.argv[1]))' "$t0" "$t1")" \
		--pids-before "$pids_before" --pids-after "$pids_after" \
		--stat-before "$tmp/stat-before" --stat-after "$tmp/stat-after" \
		--server-cpu "$server_cpu" --client-cpu "$client_cpu" >>"$samples"
	log "  load-1k $name: $(tail -n1 "$samples" | python3 "$helper" summary -)"
}

for ((trial = 1; trial <= trials; trial++)); do
	log "trial $trial/$trials"
	for i in "${!variants[@]}"; do
		idle_trial "${variants[$i]}" "${bins[$i]}" "$trial" idle-1k /1k.bin
	done
	for i in "${!variants[@]}"; do
		idle_trial "${variants[$i]}" "${bins[$i]}" "$trial" idle-64k /64k.bin
	done
	for i in "${!variants[@]}"; do
		load_trial "${variants[$i]}" "${bins[$i]}" "$trial"
	done
done

# --- 3. report ---------------------------------------------------------------

python3 "$helper" report --meta "$tmp/meta.json" --samples "$samples" --out "$json_out"
echo
echo "results: $json_out"
