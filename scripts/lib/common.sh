# shellcheck shell=bash
# Shared helpers for the scripts in scripts/: logging, ports, readiness and
# per-process CPU accounting read from /proc.
#
# Source it; it defines functions only and changes no shell options.
# Functions documented as "set X" return their answer in the global X, so
# that hot paths (CPU sampling) need no subshell.
# shellcheck disable=SC2034

# log MSG...: progress line on stderr, so stdout stays for tables.
log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }

# warn MSG...: a problem the run survives.
warn() { printf '%s: warning: %s\n' "${0##*/}" "$*" >&2; }

# die MSG...: a problem it does not.
die() {
	printf '%s: error: %s\n' "${0##*/}" "$*" >&2
	exit 1
}

# need_value OPT VALUE: an option's argument must exist (argument parsing).
need_value() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"; }

# need_uint OPT VALUE [MIN]: an option's argument must be an integer >= MIN.
need_uint() {
	if [[ ! $2 =~ ^[0-9]+$ ]] || (($2 < ${3:-0})); then
		die "$1 wants an integer >= ${3:-0}, got '$2'"
	fi
}

# need_cmd NAME HINT: exit with HINT unless NAME is on PATH.
need_cmd() {
	command -v "$1" >/dev/null 2>&1 || die "'$1' not found; $2"
}

# free_port: print a TCP port on 127.0.0.1 that nothing listens on now.
# The kernel picks it (bind to port 0); the window until our server binds it
# is tiny and only another local process could take it.
free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# tcp_open HOST PORT: true if a TCP connect to HOST:PORT succeeds now.
tcp_open() {
	# bash's /dev/tcp needs no curl; the fd closes with the subshell.
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# wait_tcp HOST PORT TIMEOUT_S [PID]: poll until HOST:PORT accepts, giving up
# after TIMEOUT_S or as soon as PID (the server we wait for) has died.
wait_tcp() {
	local host=$1 port=$2 timeout_s=$3 pid=${4:-} tries
	tries=$((timeout_s * 20))
	while ((tries-- > 0)); do
		tcp_open "$host" "$port" && return 0
		if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		sleep 0.05
	done
	return 1
}

# wait_line FILE PATTERN TIMEOUT_S [PID]: poll until FILE has a line matching
# the grep -E PATTERN (e.g. a server's "ready" line), with the same give-ups.
wait_line() {
	local file=$1 pattern=$2 timeout_s=$3 pid=${4:-} tries
	tries=$((timeout_s * 20))
	while ((tries-- > 0)); do
		grep -qE -- "$pattern" "$file" 2>/dev/null && return 0
		if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		sleep 0.05
	done
	return 1
}

# stop_pid PID [GRACE_S]: SIGTERM, wait up to GRACE_S (default 10), then
# SIGKILL. Reaps PID if it is our child. Returns PID's exit status when it
# exited by itself after SIGTERM, 0 when it was already gone.
stop_pid() {
	local pid=$1 grace_s=${2:-10} tries rc=0 state
	kill -0 "$pid" 2>/dev/null || {
		wait "$pid" 2>/dev/null || true
		return 0
	}
	kill -TERM "$pid" 2>/dev/null || true
	tries=$((grace_s * 20))
	while ((tries-- > 0)) && kill -0 "$pid" 2>/dev/null; do
		# A child that has exited but is not reaped still answers kill -0;
		# its /proc state is Z. No state at all: bash reaped it meanwhile.
		state=$(proc_state "$pid")
		[[ -z $state || $state == Z ]] && break
		sleep 0.05
	done
	state=$(proc_state "$pid")
	if kill -0 "$pid" 2>/dev/null && [[ -n $state && $state != Z ]]; then
		warn "pid $pid ignored SIGTERM for ${grace_s}s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || rc=$?
	return "$rc"
}

# bench_cleanup: the EXIT trap of a benchmark script. Stops the client
# ($client_pid) and the server ($server_pid) it has running, if any, removes
# its scratch folder ($tmp), and exits with the status the script had.
# Install with `trap bench_cleanup EXIT` after setting those three variables.
# shellcheck disable=SC2317,SC2154 # called by the trap; the caller sets the globals
bench_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n ${client_pid:-} ]]; then
		kill -TERM "$client_pid" 2>/dev/null || true
		wait "$client_pid" 2>/dev/null || true
	fi
	if [[ -n ${server_pid:-} ]]; then
		stop_pid "$server_pid" 5 || true
	fi
	[[ -n ${tmp:-} ]] && rm -rf "$tmp"
	exit "$rc"
}

# proc_state PID: print the one-letter state of PID (R, S, Z, ...), or
# nothing if it is gone.
proc_state() {
	local rest
	read -r rest 2>/dev/null <"/proc/$1/stat" || return 0
	rest=${rest##*) }
	printf '%s\n' "${rest%% *}"
}

# proc_tree PID: set the array PROC_TREE to PID and all its descendants,
# found by walking the parent links in /proc/*/stat (proc(5)).
proc_tree() {
	local root=$1 stat rest pid ppid changed
	local -A parent_of=() in_tree=()
	for stat in /proc/[0-9]*/stat; do
		pid=${stat#/proc/}
		pid=${pid%/stat}
		# Read fails if the process exited since the glob; skip it.
		read -r rest 2>/dev/null <"$stat" || continue
		# comm (field 2) may contain spaces and ')'; fields after the last
		# ") " are space-separated: state, ppid, ...
		rest=${rest##*) }
		ppid=${rest#* }
		parent_of[$pid]=${ppid%% *}
	done
	in_tree[$root]=1
	changed=1
	while ((changed)); do
		changed=0
		for pid in "${!parent_of[@]}"; do
			if [[ -z ${in_tree[$pid]:-} && -n ${in_tree[${parent_of[$pid]}]:-} ]]; then
				in_tree[$pid]=1
				changed=1
			fi
		done
	done
	PROC_TREE=("${!in_tree[@]}")
}

# cpu_ticks PID...: set CPU_TICKS to the sum of utime + stime (proc(5)
# fields 14 and 15, in clock ticks) over the PIDs; a pid that is gone counts
# 0. utime/stime cover all threads of a process, including exited ones.
cpu_ticks() {
	local pid rest
	local -a f
	CPU_TICKS=0
	for pid in "$@"; do
		read -r rest 2>/dev/null <"/proc/$pid/stat" || continue
		rest=${rest##*) }
		read -r -a f <<<"$rest"
		# f[0] is field 3 (state), so field N is f[N-3].
		CPU_TICKS=$((CPU_TICKS + f[11] + f[12]))
	done
}

# child_cpu_ticks: set CHILD_TICKS to cutime + cstime (fields 16 and 17) of
# this shell: the CPU of every child it has waited for so far. The delta
# across `wait` on one child is that child's CPU, without forking.
child_cpu_ticks() {
	local rest
	local -a f
	read -r rest <"/proc/$$/stat"
	rest=${rest##*) }
	read -r -a f <<<"$rest"
	CHILD_TICKS=$((f[13] + f[14]))
}

# cpu_list_expand LIST: print each CPU of a list like "0-3,6" on its own line.
cpu_list_expand() {
	local part lo hi
	local IFS=,
	for part in $1; do
		if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
			lo=${BASH_REMATCH[1]}
			hi=${BASH_REMATCH[2]}
			((lo <= hi)) || die "bad CPU range '$part'"
			seq "$lo" "$hi"
		elif [[ $part =~ ^[0-9]+$ ]]; then
			printf '%s\n' "$part"
		else
			die "bad CPU list '$1' (want e.g. 0 or 0-3,6)"
		fi
	done
}
