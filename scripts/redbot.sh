#!/usr/bin/env bash
# REDbot (https://redbot.org, an HTTP linter) against servery's static files.
#
# Flow:
#   1. Install REDbot from PyPI into a venv under the cache directory, unless
#      that venv already has the pinned version.
#   2. Use target/release/servery (built with cargo if it is missing), or
#      $SERVERY_BIN.
#   3. Make a temp docroot: a 1 KiB file, a 5 MiB file, and a precompressed
#      pair (x.txt + x.txt.gz), and start servery on 127.0.0.1, port 0.
#   4. Run REDbot on each URL (it also sends its own conditional, ranged and
#      gzip requests), print the response head and every finding with its
#      level, and count error-level (BAD) findings.
#   5. Stop the server and remove the temp files (trap, on any exit).
#
# Exit status: 0 no error-level finding; 1 at least one, or REDbot could not
# fetch a URL; 2 REDbot could not be installed or servery could not start.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [-- SERVE_FLAGS...]

Lints servery's responses for a 1 KiB file, a 5 MiB file and a
precompressed file with REDbot. Flags after -- go to 'servery serve'
(e.g. -- --cache-control 'public, max-age=3600').

Environment:
  REDBOT_VERSION  REDbot release to install        (default 2.7.1)
  REDBOT_VENV     its virtual environment          (default \$XDG_CACHE_HOME
                  or ~/.cache, then servery/redbot-VERSION)
  SERVERY_BIN     the binary to lint               (default target/release/servery,
                  built if missing)
USAGE
}

# setup_fail MSG...: a problem with the tools, not a finding (exit 2).
setup_fail() {
	printf '%s: %s\n' "${0##*/}" "$*" >&2
	exit 2
}

serve_flags=()
while (($#)); do
	case $1 in
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
done

version=${REDBOT_VERSION:-2.7.1}
venv=${REDBOT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/servery/redbot-$version}

# 1. REDbot.
installed=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("redbot"))' 2>/dev/null || true)
if [[ $installed != "$version" || ! -x $venv/bin/redbot ]]; then
	command -v python3 >/dev/null 2>&1 ||
		setup_fail "REDbot cannot be installed here: python3 is not on PATH"
	log "installing REDbot $version from PyPI into $venv"
	mkdir -p "$(dirname "$venv")"
	python3 -m venv "$venv" ||
		setup_fail "REDbot cannot be installed here: 'python3 -m venv $venv' failed (Debian: apt-get install python3-venv)"
	"$venv/bin/pip" install --quiet --disable-pip-version-check "redbot==$version" ||
		setup_fail "REDbot cannot be installed here: 'pip install redbot==$version' failed (no PyPI access, or no wheel for this Python)"
	[[ -x $venv/bin/redbot ]] ||
		setup_fail "REDbot $version installed but has no 'redbot' command; see '$venv/bin/pip show -f redbot'"
fi

# 2. servery.
bin=${SERVERY_BIN:-$repo/target/release/servery}
if [[ ! -x $bin ]]; then
	[[ -z ${SERVERY_BIN:-} ]] || setup_fail "SERVERY_BIN=$bin is not an executable"
	log "building $bin"
	(cd "$repo" && cargo build --release --bin servery) ||
		setup_fail "cannot build servery (cargo build --release --bin servery)"
fi

# 3. Docroot and server; everything below is removed on exit.
work=$(mktemp -d "${TMPDIR:-/tmp}/servery-redbot.XXXXXX")
server_pid=
cleanup() {
	if [[ -n $server_pid ]]; then
		stop_pid "$server_pid" 5 || true
	fi
	rm -rf -- "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

root=$work/root
mkdir -p "$root"
head -c 1024 /dev/urandom >"$root/small.bin"
head -c $((5 * 1024 * 1024)) /dev/urandom >"$root/large.bin"
for i in $(seq 1 200); do
	printf 'line %03d of a text file that compresses well, served precompressed\n' "$i"
done >"$root/x.txt"
gzip -9 --keep --no-name "$root/x.txt"

"$bin" serve "$root" --bind 127.0.0.1:0 --no-pin "${serve_flags[@]}" \
	>"$work/stdout" 2>"$work/stderr" &
server_pid=$!
if ! wait_line "$work/stdout" '^servery: ready on http://' 10 "$server_pid"; then
	cat "$work/stderr" >&2
	setup_fail "servery did not become ready ($bin)"
fi
ready=$(grep -m1 -E '^servery: ready on http://' "$work/stdout")
addr=${ready#servery: ready on http://}
addr=${addr%% *}

# 4. Lint each URL. REDbot's HAR output carries every note with its level;
# the formatter prints them and exits 1 if any is BAD.
cat >"$work/report.py" <<'PY'
import json
import sys

order = ["GENERAL", "SECURITY", "CONNECTION", "CONNEG", "CACHING",
         "VALIDATION", "RANGE"]

def show(note, depth):
    print(f"{'  ' * depth}[{note['level']}] {note['category'].lower()}: "
          f"{note['summary']} ({note['note_id']})")
    bad = note["level"] == "BAD"
    for sub in note.get("subnotes", []):
        bad |= show(sub, depth + 1)
    return bad

try:
    with open(sys.argv[1], encoding="utf-8") as f:
        har = json.load(f)
    entry = har["log"]["entries"][0]
except (OSError, ValueError, KeyError, IndexError) as e:
    print(f"  REDbot gave no result: {e}")
    sys.exit(1)
resp = entry["response"]
print(f"  {resp['httpVersion']} {resp['status']} {resp['statusText']}")
for h in resp["headers"]:
    print(f"  {h['name']}:{h['value']}")
print()
notes = sorted(entry.get("_red_messages", []),
               key=lambda n: order.index(n["category"])
               if n["category"] in order else len(order))
bad = False
for note in notes:
    bad |= show(note, 1)
sys.exit(1 if bad else 0)
PY

commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
printf 'REDbot %s on %s (%s, sha256 %.16s, tree at %s), serve flags: %s\n\n' \
	"$version" "$("$bin" --version 2>/dev/null || echo servery)" "$bin" \
	"$(sha256sum "$bin" | cut -d' ' -f1)" "$commit" "${serve_flags[*]:-(defaults)}"
findings=0
for path in /small.bin /large.bin /x.txt; do
	url="http://$addr$path"
	printf '== %s\n' "$url"
	if ! timeout 120 "$venv/bin/redbot" --output-format har "$url" >"$work/out.har" 2>"$work/redbot.err"; then
		cat "$work/redbot.err"
		printf '  REDbot failed on %s\n\n' "$url"
		findings=$((findings + 1))
		continue
	fi
	if ! "$venv/bin/python" "$work/report.py" "$work/out.har"; then
		findings=$((findings + 1))
	fi
	printf '\n'
done

if ! kill -0 "$server_pid" 2>/dev/null; then
	printf 'servery exited during the run:\n'
	cat "$work/stderr"
	findings=$((findings + 1))
fi
if ((findings)); then
	printf 'REDbot: error-level findings on %d URL(s)\n' "$findings"
	exit 1
fi
printf 'REDbot: no error-level findings\n'
