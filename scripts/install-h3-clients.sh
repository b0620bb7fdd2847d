#!/usr/bin/env bash
# Install the HTTP/3 clients of the interop tests (issue 27), which
# tests/common/h3.rs runs:
#   aioquic   Python QUIC/HTTP/3 library, pinned, in a venv at
#             target/tools/aioquic (gitignored with target/); the tests run
#             tests/support/h3get.py with its bin/python
#   gtlsclient  ngtcp2's example HTTP/3 client (Debian package ngtcp2-client,
#             built on GnuTLS), installed with apt-get
# Idempotent: a venv that already imports the pinned aioquic and a
# gtlsclient already on PATH are left as they are. A piece that cannot be
# had (no PyPI, no python3-venv, no package in the archive, not root) is
# reported with a warning and the other still installs; the tests that need
# it then say SKIPPED. Exits 0 unless the usage is wrong.
#
# On stdout, one line per client: `aioquic VERSION PYTHON` and
# `ngtcp2-client VERSION BINARY`, or `NAME missing`; progress goes to stderr.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"

# aioquic 1.7.2 needs Python >= 3.11 (Debian bookworm has 3.11). Its
# dependencies (cryptography, pylsqpack, ...) come at their newest matching
# versions.
AIOQUIC_VERSION=1.7.2

usage() {
	cat <<USAGE
usage: ${0##*/} [--venv DIR] [--no-aioquic] [--no-ngtcp2]
Makes a venv with aioquic $AIOQUIC_VERSION and installs ngtcp2's HTTP/3 client
(gtlsclient, Debian package ngtcp2-client) if they are missing.
  --venv DIR     where the venv goes (default: target/tools/aioquic under the
                 repository, where tests/common/h3.rs looks)
  --no-aioquic   skip the venv
  --no-ngtcp2    skip ngtcp2-client
Environment: PYTHON, the interpreter the venv is made from (default python3).
USAGE
}

venv=$(cd "$here/.." && pwd)/target/tools/aioquic
want_aioquic=1
want_ngtcp2=1
while (($#)); do
	case $1 in
	--venv)
		need_value "$1" "${2:-}"
		venv=$2
		shift
		;;
	--no-aioquic) want_aioquic=0 ;;
	--no-ngtcp2) want_ngtcp2=0 ;;
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

# aioquic_version: the aioquic version the venv imports, or nothing.
aioquic_version() {
	[[ -x $venv/bin/python ]] || return 0
	"$venv/bin/python" -c 'import aioquic; print(aioquic.__version__)' 2>/dev/null || true
}

# install_aioquic: make the venv if need be, then pip install the pin.
install_aioquic() {
	local python=${PYTHON:-python3} have
	have=$(aioquic_version)
	if [[ $have == "$AIOQUIC_VERSION" ]]; then
		log "aioquic: already installed ($have in $venv)"
		return 0
	fi
	if ! command -v "$python" >/dev/null 2>&1; then
		warn "'$python' not found; install Python >= 3.11 (or set PYTHON) for aioquic"
		return 1
	fi
	if [[ ! -x $venv/bin/python ]]; then
		log "$python -m venv $venv"
		mkdir -p "$(dirname "$venv")"
		if ! "$python" -m venv "$venv" >&2; then
			rm -rf "$venv"
			warn "could not make a venv (Debian: apt-get install python3-venv)"
			return 1
		fi
	fi
	log "pip install aioquic==$AIOQUIC_VERSION (into $venv)"
	if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
		"aioquic==$AIOQUIC_VERSION" >&2; then
		warn "pip could not install aioquic==$AIOQUIC_VERSION (is PyPI reachable?)"
		return 1
	fi
	have=$(aioquic_version)
	[[ $have == "$AIOQUIC_VERSION" ]] || {
		warn "the venv imports aioquic '${have:-nothing}' after the install"
		return 1
	}
	log "aioquic: installed ($have in $venv)"
}

# install_ngtcp2: apt-get install ngtcp2-client unless gtlsclient is on PATH.
install_ngtcp2() {
	local sudo=()
	if command -v gtlsclient >/dev/null 2>&1; then
		log "gtlsclient: already installed ($(command -v gtlsclient))"
		return 0
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		warn "no apt-get; install ngtcp2's example client (gtlsclient) by hand"
		return 1
	fi
	if ((EUID != 0)); then
		command -v sudo >/dev/null 2>&1 || {
			warn "run as root to apt-get install ngtcp2-client"
			return 1
		}
		sudo=(sudo)
	fi
	export DEBIAN_FRONTEND=noninteractive
	log "apt-get update"
	"${sudo[@]}" apt-get update -qq >&2 || warn "apt-get update failed; trying the old lists"
	if ! apt-cache show ngtcp2-client >/dev/null 2>&1; then
		warn "package 'ngtcp2-client' is not in the apt archive"
		return 1
	fi
	log "apt-get install ngtcp2-client"
	"${sudo[@]}" apt-get install -y --no-install-recommends ngtcp2-client >&2 || {
		warn "apt-get install ngtcp2-client failed"
		return 1
	}
	command -v gtlsclient >/dev/null 2>&1 || {
		warn "ngtcp2-client installed no gtlsclient on PATH"
		return 1
	}
	log "gtlsclient: installed ($(command -v gtlsclient))"
}

if ((want_aioquic)); then
	install_aioquic || true
	if [[ $(aioquic_version) == "$AIOQUIC_VERSION" ]]; then
		printf 'aioquic %s %s\n' "$AIOQUIC_VERSION" "$venv/bin/python"
	else
		printf 'aioquic missing\n'
	fi
fi
if ((want_ngtcp2)); then
	install_ngtcp2 || true
	if command -v gtlsclient >/dev/null 2>&1; then
		version=$(dpkg-query -W -f '${Version}' ngtcp2-client 2>/dev/null || echo unknown)
		printf 'ngtcp2-client %s %s\n' "$version" "$(command -v gtlsclient)"
	else
		printf 'ngtcp2-client missing\n'
	fi
fi
