#!/usr/bin/env bash
# The scaling kit (issue 15): servery's scaling figures at 1, 2, 4 and 8
# workers from one command on a lent 16-core machine that has no network and
# nothing installed, where only the working tree and a few git-ignored
# folders (64 MiB together) travel.
#
#   scripts/scaling-kit.sh build                  # here, with cargo and apt
#   scripts/scaling-kit.sh run [--dry-run] [--out DIR] [--kit DIR] [-- MATRIX_FLAGS...]
#
# build puts into one git-ignored folder (kit/ at the repository root,
# ignored by .gitignore):
#   kit/bin/      servery, examples/hello and servery-load, built in the
#                 measured profile (`--profile release-lto`: fat LTO, one
#                 codegen unit) with the debug info stripped (the code is the
#                 same bytes `cargo build --profile release-lto` makes; their SHA-256s are in
#                 the manifest and in every matrix artifact). servery-load is
#                 also the docroot generator (`servery-load docroot DIR`),
#                 the load generator and the matrix.
#   kit/debs/     nginx and h2o from `apt-get download`, and the packages of
#                 the shared libraries they load (ldd of the downloaded
#                 binaries, each library mapped to its package with dpkg -S)
#                 that a minimal Debian base does not have. That base is the
#                 Essential and Priority: required packages and everything
#                 they depend on (debootstrap's minbase), read from the apt
#                 lists with apt-cache.
#   kit/MANIFEST  commit, every file's size and SHA-256, each program's ldd
#                 and newest glibc symbol, and which libraries were left to
#                 the base.
# and refuses to finish if the folder is 64 MiB or more.
#
# run (no network, nothing installed; needs bash, dpkg-deb, taskset, ldd):
#   1. unpacks every kit/debs/*.deb with `dpkg -x` into kit/prefix (never /),
#      removed again when the run ends so it never travels;
#   2. puts kit/prefix's sbin and bin first on PATH (the matrix looks nginx
#      and h2o up there) and its library folder on LD_LIBRARY_PATH (only this
#      script's children see it), sets H2O_ROOT to the prefix's /usr (h2o's
#      share folder); nginx reads only the config the matrix writes (inline
#      types, every path in its own prefix) and loads no dynamic module;
#   3. checks that ldd finds every library of nginx and h2o, then that every
#      server answers a valid response: servery (thread and process) and
#      examples/hello (both) and nginx and h2o each start on CPU 0 of this
#      process's set, serve the matrix's docroot, and must answer with the
#      exact bytes (`servery-load validate --expect-sha256`) and exit 0 on
#      SIGTERM;
#   4. runs `servery-load matrix --preset scaling` (--dry-run: with
#      --workers 1, for a 2-core development machine: 1 worker on one core,
#      the client on the other, in under 5 minutes), which prints its planned
#      total, shows progress on stderr, and writes matrix-STAMP.json, .md and
#      two .svg charts into --out (default bench/results); this script's
#      whole output goes to scaling-kit-STAMP.log beside them. Flags after
#      `--` go to the matrix as they are, after the preset's (a partial rerun:
#      `-- --scenarios static-1k-pipelined`).
#
# On the lent machine (docs/benchmarks.md, "Scaling kit (issue 15)"): carry
# "kit", and run `scripts/scaling-kit.sh run --out "$OUT"`.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"
# shellcheck source=lib/nginx.sh
. "$here/lib/nginx.sh"
# shellcheck source=lib/h2o.sh
. "$here/lib/h2o.sh"

# What the device tool carries at most, working tree included.
readonly KIT_LIMIT_BYTES=$((64 << 20))
# The peers, by Debian package, and the program each installs.
readonly PEERS=(nginx:usr/sbin/nginx h2o:usr/bin/h2o)
readonly TRIPLET=x86_64-linux-gnu

usage() {
	cat <<USAGE
usage: ${0##*/} build [--kit DIR]
       ${0##*/} run [--dry-run] [--out DIR] [--kit DIR] [-- MATRIX_FLAGS...]
build (here): release binaries, nginx, h2o and the libraries they need that a
  minimal Debian base lacks, in one git-ignored folder (default: kit/).
run (on the lent machine, or here with --dry-run): unpack the peers into
  KIT/prefix, check every server's answer, run servery-load matrix --preset
  scaling into --out (default: bench/results).
  --dry-run   the same with --workers 1 (a 2-core machine; under 5 minutes)
  -- FLAGS    passed to servery-load matrix after the preset's, e.g.
              -- --scenarios static-1k-pipelined (a partial rerun)
USAGE
}

(($#)) || {
	usage >&2
	exit 2
}
command=$1
shift
kit=$root/kit
out_dir=$root/bench/results
dry_run=0
matrix_extra=()
while (($#)); do
	case $1 in
	--kit | --out) need_value "$1" "${2:-}" ;;&
	--kit) kit=$2 && shift ;;
	--out) out_dir=$2 && shift ;;
	--dry-run) dry_run=1 ;;
	--)
		shift
		matrix_extra=("$@")
		break
		;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
	shift
done

# sha256_of FILE: print FILE's SHA-256.
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# package_of LIB_PATH: print the Debian package that ships LIB_PATH. With the
# merged /usr a library resolves through /lib but dpkg knows it under /usr/lib
# (or the other way round), so both spellings are asked.
package_of() {
	local path=$1 real alt
	real=$(readlink -f "$path")
	local owner
	for alt in "$path" "$real" "${path/#\/lib\//\/usr\/lib\/}" "${real/#\/usr\/lib\//\/lib\/}" \
		"${real/#\/lib\//\/usr\/lib\/}" "${path/#\/usr\/lib\//\/lib\/}"; do
		if owner=$(dpkg -S "$alt" 2>/dev/null); then
			printf '%s\n' "${owner%%:*}"
			return 0
		fi
	done
	return 1
}

# minbase_packages: print debootstrap's minbase set: the Essential and
# Priority: required packages of the apt lists and their Depends, recursively.
minbase_packages() {
	local required
	required=$(apt-cache dumpavail | awk 'BEGIN { RS = "" }
		/\nPriority: required/ || /\nEssential: yes/ {
			match($0, /^Package: [^\n]+/); print substr($0, 10, RLENGTH - 9)
		}' | sort -u)
	[[ -n $required ]] || die "apt-cache dumpavail lists no required package; run apt-get update"
	# shellcheck disable=SC2086 # one word per package
	apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances $required 2>/dev/null |
		grep -v '^ ' | sed 's/:.*//' | sort -u
}

# newest_glibc FILE: print the newest GLIBC_x.y symbol version FILE needs.
newest_glibc() {
	objdump -T "$1" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n1
}

build() {
	local target release tmp pkgs=() pkg bin lib path base f size total
	need_cmd cargo "install Rust (rustup.rs)"
	need_cmd apt-get "the kit's peers come from Debian packages"
	need_cmd dpkg "the kit's peers come from Debian packages"
	need_cmd strip "install binutils"
	need_cmd objdump "install binutils"
	[[ $(uname -m) == x86_64 ]] || die "the lent machine is x86-64; build the kit on x86-64"
	target=${CARGO_TARGET_DIR:-$root/target}
	[[ $target == /* ]] || target=$root/$target
	release=$target/release-lto
	# servery on its own, as the matrix builds it (an example beside it would
	# unify the examples' dev-dependency features into the measured binary).
	log "cargo build --profile release-lto --bin servery"
	(cd "$root" && cargo build --profile release-lto --bin servery)
	log "cargo build --profile release-lto --example hello"
	(cd "$root" && cargo build --profile release-lto --example hello)
	log "cargo build --profile release-lto -p servery-bench --bin servery-load"
	(cd "$root" && cargo build --profile release-lto -p servery-bench --bin servery-load)

	rm -rf "$kit"
	mkdir -p "$kit/bin" "$kit/debs"
	for bin in servery examples/hello servery-load; do
		strip --strip-debug -o "$kit/bin/${bin##*/}" "$release/$bin"
	done

	tmp=$(mktemp -d)
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '$tmp'" EXIT
	log "apt-get download nginx h2o"
	for pkg in "${PEERS[@]}"; do
		pkgs+=("${pkg%%:*}")
	done
	(cd "$kit/debs" && apt-get download "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed') ||
		die "apt-get download ${pkgs[*]} failed (no mirror reachable?); the kit needs the peers' packages"
	for f in "$kit"/debs/*.deb; do
		dpkg -x "$f" "$tmp/peers"
	done

	# The libraries each peer loads, by package; the base keeps its own.
	local -A needed=() in_base=()
	local minbase
	minbase=$(minbase_packages)
	{
		printf 'servery scaling kit (issue 15), built %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		printf 'commit %s%s\n' "$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)" \
			"$( [[ -n $(git -C "$root" status --porcelain 2>/dev/null) ]] && echo ' (dirty)')"
		printf 'minimal base: %s packages (Essential, Priority: required and their Depends)\n' \
			"$(wc -l <<<"$minbase")"
		for pkg in "${PEERS[@]}"; do
			bin=$tmp/peers/${pkg#*:}
			[[ -x $bin ]] || die "package ${pkg%%:*} has no ${pkg#*:}"
			printf '\nldd %s (newest glibc symbol %s):\n' "${pkg#*:}" "$(newest_glibc "$bin")"
			while read -r lib path; do
				[[ $path == "not found" ]] &&
					die "${pkg#*:} needs $lib, which this machine lacks; install it (apt-get install) and build again"
				base=$(package_of "$path") || die "no package ships $path ($lib)"
				if grep -qx "$base" <<<"$minbase"; then
					in_base[$base]=1
					printf '  %s => %s (%s, in the base: not carried)\n' "$lib" "$path" "$base"
				else
					needed[$base]=1
					printf '  %s => %s (%s, carried)\n' "$lib" "$path" "$base"
				fi
			done < <(ldd "$bin" | awk '$2 == "=>" { print $1, ($3 == "not" ? "not found" : $3) }')
		done
	} >"$tmp/manifest"
	if ((${#needed[@]})); then
		log "apt-get download ${!needed[*]}"
		(cd "$kit/debs" && apt-get download "${!needed[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed') ||
			die "apt-get download ${!needed[*]} failed"
	fi
	log "left to the base: ${!in_base[*]}"

	{
		cat "$tmp/manifest"
		printf '\nservery, hello, servery-load: ldd\n'
		for bin in "$kit"/bin/*; do
			printf '  %s (newest glibc symbol %s): %s\n' "${bin##*/}" "$(newest_glibc "$bin")" \
				"$(ldd "$bin" | awk '$2 == "=>" { printf "%s ", $1 }')"
		done
		printf '\nfiles (bytes, sha256):\n'
		(cd "$kit" && for f in bin/* debs/*; do
			printf '  %s %s %s\n' "$f" "$(stat -c %s "$f")" "$(sha256_of "$f")"
		done)
		printf '\nunstripped (target/release-lto), sha256:\n'
		for bin in servery examples/hello servery-load; do
			printf '  %s %s\n' "$bin" "$(sha256_of "$release/$bin")"
		done
	} >"$kit/MANIFEST"

	total=$(du -sb "$kit" | cut -f1)
	for f in "$kit"/bin/* "$kit"/debs/*; do
		size=$(stat -c %s "$f")
		log "$(printf '%8.1f MiB  %s' "$(bc_div "$size")" "${f#"$root"/}")"
	done
	log "$(printf 'kit: %.1f MiB in all (limit 64 MiB with the working tree)' "$(bc_div "$total")")"
	((total < KIT_LIMIT_BYTES)) || die "the kit is $total bytes, over the 64 MiB the device tool carries"
	git -C "$root" check-ignore -q "$kit/MANIFEST" 2>/dev/null ||
		warn "$kit is not git-ignored: the device tool carries only ignored paths"
	rm -rf "$tmp"
	trap - EXIT
}

# bc_div BYTES: BYTES in MiB, one decimal (awk, since bash has no floats).
bc_div() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# pick_port: print a port on 127.0.0.1 nothing listens on now (bash only:
# the lent machine may have no python).
pick_port() {
	local port
	for ((port = 20000 + RANDOM % 20000; port < 65000; port++)); do
		tcp_open 127.0.0.1 "$port" || {
			printf '%s\n' "$port"
			return 0
		}
	done
	die "no free port on 127.0.0.1"
}

# The server this script has running (one at a time), stopped by the EXIT
# trap, and the folders it removes.
server_pid=""
work=""
prefix=""
# The tee that copies the output into the log, waited for at the end so the
# log's last lines are on disk before the machine's session ends.
tee_pid=""
# shellcheck disable=SC2317 # called by the trap
run_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $server_pid ]] && { stop_pid "$server_pid" 5 || true; }
	[[ -n $work ]] && rm -rf "$work"
	[[ -n $prefix ]] && rm -rf "$prefix"
	((rc == 0)) || log "failed (exit $rc)"
	if [[ -n $tee_pid ]]; then
		exec 1>&- 2>&-
		wait "$tee_pid" 2>/dev/null || true
	fi
	exit "$rc"
}

# check_server NAME CPU URL_PATH... -- PROGRAM ARGS...: start PROGRAM pinned
# to CPU, wait until every URL_PATH answers with the docroot file's exact
# bytes (servery-load validate), then stop it with SIGTERM; it must exit 0.
# The port is the global $port, the expected digests are in the global
# associative array $digest (by file name).
check_server() {
	local name=$1 cpu=$2 paths=() pid tries rc path file urls=() expect=()
	shift 2
	while [[ $1 != -- ]]; do
		paths+=("$1")
		shift
	done
	shift
	taskset -c "$cpu" "$@" >"$work/$name.log" 2>&1 &
	pid=$!
	server_pid=$pid
	for path in "${paths[@]}"; do
		file=${path#/}
		urls+=("http://127.0.0.1:$port$path")
		expect+=("${digest[$file]}")
	done
	tries=200 # 10 s
	until "$kit/bin/servery-load" validate --expect-sha256 "${expect[0]}" "${urls[0]}" >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null || ((--tries == 0)); then
			tail -n 5 "$work/$name.log" >&2 || true
			die "$name did not answer ${urls[0]} within 10 s"
		fi
		sleep 0.05
	done
	for ((i = 0; i < ${#urls[@]}; i++)); do
		"$kit/bin/servery-load" validate --expect-sha256 "${expect[i]}" "${urls[i]}" >"$work/$name.validate" 2>&1 || {
			cat "$work/$name.validate" >&2
			die "$name: wrong answer for ${urls[i]}"
		}
	done
	rc=0
	stop_pid "$pid" 10 || rc=$?
	server_pid=""
	((rc == 0)) || die "$name exited $rc after SIGTERM (log: $(tail -n 3 "$work/$name.log" | tr '\n' ' '))"
	log "$name: valid answers for ${paths[*]}, clean exit"
}

run_kit() {
	local started deb cpu peer bin missing workers_flag=() stamp logfile
	local name sha
	started=$SECONDS
	[[ -f $kit/MANIFEST ]] || die "no kit at $kit; run '${0##*/} build' first (here, with cargo and apt)"
	need_cmd dpkg-deb "the kit unpacks its .deb files with dpkg -x"
	need_cmd taskset "the matrix pins every server (util-linux)"
	need_cmd ldd "the kit checks the peers' libraries (libc-bin)"
	[[ $(uname -m) == x86_64 ]] || die "the kit's programs are x86-64; this is $(uname -m)"
	mkdir -p "$out_dir"
	stamp=$(date -u +%Y%m%dT%H%M%SZ)
	logfile=$out_dir/scaling-kit-$stamp.log
	# Everything from here on goes to the terminal and the log.
	exec > >(tee -a "$logfile") 2>&1
	tee_pid=$!
	log "kit $kit ($(head -n2 "$kit/MANIFEST" | tail -n1)); output in $out_dir"
	trap run_cleanup EXIT INT TERM

	# 1. Unpack the peers into the kit's own prefix.
	prefix=$kit/prefix
	rm -rf "$prefix"
	mkdir -p "$prefix"
	for deb in "$kit"/debs/*.deb; do
		dpkg -x "$deb" "$prefix"
	done
	log "unpacked $(find "$kit/debs" -name '*.deb' | wc -l) packages into $prefix"

	# 2. Point everything at it.
	export PATH="$prefix/usr/sbin:$prefix/usr/bin:$PATH"
	export LD_LIBRARY_PATH="$prefix/usr/lib/$TRIPLET:$prefix/lib/$TRIPLET${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export H2O_ROOT=$prefix/usr

	# 3. Libraries, versions, answers.
	for peer in "${PEERS[@]}"; do
		bin=$prefix/${peer#*:}
		[[ -x $bin ]] || die "the kit has no ${peer#*:}"
		[[ $(command -v "${bin##*/}") == "$bin" ]] || die "PATH finds $(command -v "${bin##*/}") before the kit's $bin"
		missing=$(ldd "$bin" | awk '/not found/ { print $1 }')
		[[ -z $missing ]] || die "${bin##*/} needs $missing, which neither this machine nor the kit has"
	done
	log "$(nginx -v 2>&1), $(h2o --version | head -n1), libraries all found"
	work=$(mktemp -d)
	local -A digest=()
	while read -r name _ sha; do
		digest[$name]=$sha
	done < <("$kit/bin/servery-load" docroot "$work/docroot")
	log "docroot: ${!digest[*]}"
	cpu=$(taskset -cp $$ | sed 's/.*: //')
	cpu=$(cpu_list_expand "$cpu" | head -n1)
	local servery=("$kit/bin/servery" serve "$work/docroot")
	local hello=("$kit/bin/hello" serve "$work/docroot")
	port=$(pick_port)
	check_server servery-thread "$cpu" /1k.bin /64k.bin -- \
		"${servery[@]}" --bind "127.0.0.1:$port" --workers 1 --cpus "$cpu"
	port=$(pick_port)
	check_server servery-process "$cpu" /1k.bin /64k.bin -- \
		"${servery[@]}" --bind "127.0.0.1:$port" --workers 1 --cpus "$cpu" --isolation process
	port=$(pick_port)
	check_server hello-thread "$cpu" /hello.txt -- \
		"${hello[@]}" --bind "127.0.0.1:$port" --workers 1 --cpus "$cpu"
	port=$(pick_port)
	check_server hello-process "$cpu" /hello.txt -- \
		"${hello[@]}" --bind "127.0.0.1:$port" --workers 1 --cpus "$cpu" --isolation process
	port=$(pick_port)
	write_nginx_conf "$work/nginx" "$work/docroot" "$port" 1 "$cpu"
	nginx_args "$work/nginx"
	check_server nginx "$cpu" /1k.bin /64k.bin /hello.txt -- nginx "${NGINX_ARGS[@]}"
	port=$(pick_port)
	write_h2o_conf "$work/h2o" "$work/docroot" "$port" 1
	h2o_args "$work/h2o"
	check_server h2o "$cpu" /1k.bin /64k.bin /hello.txt -- h2o "${H2O_ARGS[@]}"
	log "checks done after $((SECONDS - started)) s"

	# 4. The matrix.
	((dry_run)) && workers_flag=(--workers 1)
	log "servery-load matrix --preset scaling ${workers_flag[*]} ${matrix_extra[*]}"
	"$kit/bin/servery-load" matrix --preset scaling "${workers_flag[@]}" \
		--repo "$root" --out "$out_dir" \
		--servery-bin "$kit/bin/servery" --hello-bin "$kit/bin/hello" "${matrix_extra[@]}"
	local took=$((SECONDS - started)) budget=480
	((dry_run)) && budget=300
	log "whole run: $took s (budget $budget s)"
	((took <= budget)) || warn "the run took longer than its $budget s budget"
}

case $command in
build) build ;;
run) run_kit ;;
-h | --help) usage ;;
*)
	usage >&2
	exit 2
	;;
esac
