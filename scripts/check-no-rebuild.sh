#!/usr/bin/env bash
# Shows that a benchmark matrix run costs a later `cargo build --release`
# nothing and leaves `git status` as it found it (issue 24, item 3).
#
#   scripts/check-no-rebuild.sh [-- MATRIX_FLAGS...]
#
# Flow:
#   1. Note `git status --porcelain`, then `cargo build --release` (the
#      README's build), so what follows starts from a built tree.
#   2. `cargo run --release -p servery-bench -- matrix --quick --scenarios
#      static-1k --servers servery-thread,nginx` (the issue's command; flags
#      after `--` replace the scenario and server flags), which builds what it
#      measures in the release-lto profile.
#   3. `cargo build --release` again, reading cargo's JSON messages: every
#      artifact must be `fresh` (nothing compiled, no build script rerun).
#   4. `git status --porcelain` must be what it was in step 1.
# Exit 0 when both hold, 1 naming what was rebuilt or what changed, 2 on a
# setup failure. nginx is optional: without it the matrix runs servery alone
# and says so.

set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

log() { printf 'check-no-rebuild: %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

command -v cargo >/dev/null || die "cargo is missing: install Rust (https://rustup.rs)"
command -v git >/dev/null || die "git is missing"
command -v python3 >/dev/null || die "python3 is missing (it reads cargo's JSON messages)"

matrix=(--quick --scenarios static-1k --servers servery-thread,nginx)
if [[ ${1:-} == -- ]]; then
	shift
	matrix=(--quick "$@")
fi

before=$(git status --porcelain)
log "cargo build --release"
cargo build --release >&2 || die "cargo build --release failed"

log "cargo run --release -p servery-bench -- matrix ${matrix[*]}"
cargo run --release -p servery-bench -- matrix "${matrix[@]}" >&2 ||
	die "the matrix failed"

log "cargo build --release (again: nothing may be compiled)"
rebuilt=$(cargo build --release --message-format=json 2>/dev/null | python3 -c '
import json, sys
stale = []
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and not m.get("fresh", True):
        stale.append(m["target"]["name"] + " (" + m["package_id"] + ")")
    if m.get("reason") == "build-script-executed" and not m.get("fresh", True):
        stale.append("build script of " + m["package_id"])
print("\n".join(stale))
')
status=0
if [[ -n $rebuilt ]]; then
	log "rebuilt after the matrix:"
	printf '  %s\n' "$rebuilt" >&2
	status=1
else
	log "nothing rebuilt: every artifact of cargo build --release was fresh"
fi

after=$(git status --porcelain)
if [[ $after != "$before" ]]; then
	log "git status changed:"
	diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") >&2 || true
	status=1
else
	log "git status unchanged"
fi
exit "$status"
