#!/usr/bin/env bash
# Install the programs servery is benchmarked against, from Debian packages:
#   nginx  peer server          wrk  load generator          h2o  peer server
#   h2load HTTP/2 load generator (Debian package nghttp2-client)
#   caddy  peer server (Debian bookworm: Caddy 2.6)
# Idempotent: installs only what is missing from PATH. Run as root (or with
# sudo) on Debian/Ubuntu. A package the archive lacks is skipped with a
# warning; the exit status is non-zero only if nginx or wrk is still missing.
#
# Installing nginx or caddy must not leave a system server running on port
# 80, so for the install we add a policy-rc.d that forbids starting services
# (invoke-rc.d(8); deb-systemd-invoke, which caddy's postinst uses, asks it
# too), and remove it afterwards if we made it. Where systemd runs, the
# peers' units that this run installed are also disabled (their postinst
# enables them for the next boot) and stopped, in case a policy-rc.d that
# was already there allowed the start.
#
# The helpers that write a benchmark config live in scripts/lib/nginx.sh
# (write_nginx_conf), scripts/lib/h2o.sh (write_h2o_conf) and
# scripts/lib/caddy.sh (write_caddy_conf); servery-load matrix and
# scripts/bench-quick.sh call them for every run (a fresh port and worker
# count each time). --configs DIR also writes one of each here, for a look or
# a manual run: one worker per CPU of --cpus, access log off, sendfile on
# (nginx; h2o 2.2 has none), keep-alive without a practical request limit.
#
# A fresh machine runs the benchmark matrix after two commands:
#   scripts/install-peers.sh
#   cargo run --release -p servery-bench -- matrix --quick
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"
# shellcheck source=lib/nginx.sh
. "$here/lib/nginx.sh"
# shellcheck source=lib/h2o.sh
. "$here/lib/h2o.sh"
# shellcheck source=lib/caddy.sh
. "$here/lib/caddy.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [--no-h2o] [--no-caddy] [--configs DIR [--cpus LIST] [--port PORT] [--root DIR]]
Installs nginx, wrk, h2load (nghttp2-client), h2o and caddy with apt-get if
their binaries are missing.
  --no-h2o        skip h2o
  --no-caddy      skip caddy
  --configs DIR   also write DIR/nginx/nginx.conf, DIR/h2o/h2o.conf and
                  DIR/caddy/Caddyfile (with DIR/caddy/caddy.env)
  --cpus LIST     their worker CPUs, one worker each (default: all, 0-$(($(nproc) - 1)))
  --port PORT     their port on 127.0.0.1 (default 8080)
  --root DIR      their docroot (default: the repository's examples/site)
USAGE
}

want_h2o=1
want_caddy=1
configs=""
cpu_list="0-$(($(nproc) - 1))"
port=8080
root=$(cd "$here/.." && pwd)/examples/site
while (($#)); do
	case $1 in
	--configs | --cpus | --port | --root)
		need_value "$1" "${2:-}"
		;;&
	--configs) configs=$2 && shift ;;
	--cpus) cpu_list=$2 && shift ;;
	--port) port=$2 && shift ;;
	--root) root=$2 && shift ;;
	--no-h2o) want_h2o=0 ;;
	--no-caddy) want_caddy=0 ;;
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

# binary:package pairs (Debian's "nginx" is the core build, no extra modules).
wanted=(nginx:nginx wrk:wrk h2load:nghttp2-client)
((want_h2o)) && wanted+=(h2o:h2o)
((want_caddy)) && wanted+=(caddy:caddy)

missing_bins=()
missing_pkgs=()
for pair in "${wanted[@]}"; do
	bin=${pair%%:*}
	pkg=${pair#*:}
	# nginx lives in /usr/sbin, which a non-root PATH may lack.
	if command -v "$bin" >/dev/null 2>&1 || [[ -x /usr/sbin/$bin ]]; then
		log "$bin: already installed ($(command -v "$bin" || echo "/usr/sbin/$bin"))"
	else
		missing_bins+=("$bin")
		missing_pkgs+=("$pkg")
	fi
done

# write_configs: the --configs example configs, once the programs exist.
write_configs() {
	[[ -n $configs ]] || return 0
	local workers
	workers=$(cpu_list_expand "$cpu_list" | wc -l)
	write_nginx_conf "$configs/nginx" "$root" "$port" "$workers" "$cpu_list"
	log "wrote $configs/nginx/nginx.conf ($workers worker(s) on CPUs $cpu_list, port $port)"
	if ((want_h2o)); then
		write_h2o_conf "$configs/h2o" "$root" "$port" "$workers"
		log "wrote $configs/h2o/h2o.conf ($workers thread(s); pin with taskset -c $cpu_list)"
	fi
	if ((want_caddy)); then
		write_caddy_conf "$configs/caddy" "$root" "$port" "$workers"
		log "wrote $configs/caddy/Caddyfile (GOMAXPROCS=$workers in caddy.env; pin with taskset -c $cpu_list)"
	fi
}

# keep_stopped PKG...: where systemd runs, disable and stop the system
# service of each peer package this run installed, so that nothing of theirs
# listens now or after a reboot. Without systemd there is nothing to undo:
# policy-rc.d kept the install from starting anything.
keep_stopped() {
	local pkg
	[[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1 || return 0
	for pkg in "$@"; do
		case $pkg in
		nginx | h2o | caddy) ;;
		*) continue ;;
		esac
		if systemctl list-unit-files "$pkg.service" >/dev/null 2>&1; then
			log "systemctl disable --now $pkg.service (the benchmark starts its own)"
			"${sudo[@]}" systemctl disable --now "$pkg.service" >/dev/null 2>&1 ||
				warn "could not disable $pkg.service; stop it before benchmarking"
		fi
	done
}

if ((${#missing_pkgs[@]} == 0)); then
	log "nothing to install"
	write_configs
	exit 0
fi

need_cmd apt-get "install ${missing_bins[*]} with your system's package manager"
sudo=()
if ((EUID != 0)); then
	need_cmd sudo "run as root to install ${missing_pkgs[*]}"
	sudo=(sudo)
fi

policy=/usr/sbin/policy-rc.d
made_policy=0
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if ((made_policy)); then
		"${sudo[@]}" rm -f "$policy"
	fi
}
trap cleanup EXIT
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\n# Added by servery scripts/install-peers.sh for one install.\nexit 101\n' |
		"${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 755 "$policy"
	made_policy=1
fi

export DEBIAN_FRONTEND=noninteractive
log "apt-get update"
"${sudo[@]}" apt-get update -qq

# Install what the archive has; a package it lacks (h2o is not in every
# release) is skipped so the others still install.
available=()
for pkg in "${missing_pkgs[@]}"; do
	if apt-cache show "$pkg" >/dev/null 2>&1; then
		available+=("$pkg")
	else
		warn "package '$pkg' is not in the apt archive; skipping it"
	fi
done
if ((${#available[@]})); then
	log "apt-get install ${available[*]}"
	"${sudo[@]}" apt-get install -y --no-install-recommends "${available[@]}"
	keep_stopped "${available[@]}"
fi

status=0
for bin in "${missing_bins[@]}"; do
	if command -v "$bin" >/dev/null 2>&1 || [[ -x /usr/sbin/$bin ]]; then
		log "$bin: installed"
	elif [[ $bin == h2o || $bin == caddy ]]; then
		warn "$bin is still missing; benchmarks against $bin will be skipped"
	else
		warn "$bin is still missing"
		status=1
	fi
done
write_configs
exit "$status"
