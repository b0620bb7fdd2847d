#!/usr/bin/env bash
# Make pebble (Let's Encrypt's test ACME CA) and pebble-challtestsrv (its
# mock DNS server) available for tests/acme_engine.rs, without root.
#
# Looks for both binaries on PATH, then under DIR/usr/bin; if either is
# missing, downloads Debian's `pebble` package (which ships both) with
# `apt-get download` into a temp dir and unpacks it with `dpkg -x` into DIR,
# so the binaries end up at DIR/usr/bin/pebble and
# DIR/usr/bin/pebble-challtestsrv. Idempotent: a second run finds them and
# downloads nothing.
#
# The last line on stdout is the directory holding both binaries; progress
# goes to stderr. Exits non-zero, saying why, when they cannot be had.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [DIR]
Finds pebble and pebble-challtestsrv on PATH or under DIR/usr/bin, else
unpacks Debian's pebble package into DIR (default: target/tools/pebble under
the repository). Prints the directory holding both binaries last on stdout.
USAGE
}

dir=""
while (($#)); do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	-*)
		usage >&2
		exit 2
		;;
	*)
		[[ -z $dir ]] || {
			usage >&2
			exit 2
		}
		dir=$1
		;;
	esac
	shift
done
[[ -n $dir ]] || dir=$(cd "$here/.." && pwd)/target/tools/pebble

bins=(pebble pebble-challtestsrv)

# on_path: both binaries are on PATH, in the same directory.
on_path() {
	local b first=""
	for b in "${bins[@]}"; do
		command -v "$b" >/dev/null 2>&1 || return 1
	done
	first=$(dirname "$(command -v pebble)")
	[[ -x $first/pebble-challtestsrv ]] || return 1
	printf '%s\n' "$first"
}

# in_dir: both binaries are under DIR/usr/bin.
in_dir() {
	local b
	for b in "${bins[@]}"; do
		[[ -x $dir/usr/bin/$b ]] || return 1
	done
	printf '%s\n' "$dir/usr/bin"
}

if found=$(on_path) || found=$(in_dir); then
	log "pebble: already there ($found)"
	printf '%s\n' "$found"
	exit 0
fi

need_cmd apt-get "install Debian's pebble package by hand, or put pebble and pebble-challtestsrv on PATH"
need_cmd dpkg "dpkg -x unpacks the package; install dpkg or put pebble on PATH"

tmp=$(mktemp -d)
# apt-get download drops to the _apt user, which must be able to write here.
chmod 755 "$tmp"
# shellcheck disable=SC2317 # called by the trap
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

log "apt-get download pebble (into $tmp)"
if ! (cd "$tmp" && apt-get download pebble >&2); then
	# The package lists may be missing or stale: update them if we may.
	if ((EUID == 0)); then
		log "apt-get update, then try again"
		apt-get update -qq >&2 || die "apt-get update failed"
		(cd "$tmp" && apt-get download pebble >&2) ||
			die "apt-get download pebble failed: is the pebble package in this system's archive?"
	else
		die "apt-get download pebble failed (run 'apt-get update' as root, or install pebble)"
	fi
fi

debs=("$tmp"/pebble_*.deb)
[[ -f ${debs[0]} ]] || die "apt-get download left no pebble_*.deb in $tmp"
mkdir -p "$dir"
log "dpkg -x ${debs[0]##*/} $dir"
dpkg -x "${debs[0]}" "$dir" || die "dpkg -x failed for ${debs[0]}"

found=$(in_dir) || die "the pebble package did not provide ${bins[*]} under $dir/usr/bin"
log "pebble: installed ($found)"
printf '%s\n' "$found"
