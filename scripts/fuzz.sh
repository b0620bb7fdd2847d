#!/usr/bin/env bash
# Coverage-guided fuzzing of the HTTP/2 code without I/O (src/http/h2) with
# cargo-fuzz and libFuzzer: the frame reader, the HPACK decoder and the
# connection state machine fed any bytes (fuzz/fuzz_targets/).
#
# Flow:
#   1. A nightly toolchain must be installed (rustup); none: say SKIPPED and
#      exit 0. cargo-fuzz is installed into target/tools/cargo-fuzz if
#      missing (crates.io).
#   2. Each target named (default: all) runs for --minutes (default 1) on
#      one job, its corpus kept in fuzz/corpus/TARGET (grown across runs,
#      not in git; seeds of fuzz/seeds/TARGET are read too).
#   3. A crash stops the run: its input is in fuzz/artifacts/TARGET and the
#      script exits 1. Each target's last lines (runs, coverage, corpus) are
#      printed and written to --out FILE if given.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [--minutes N] [--out FILE] [TARGET...]
Fuzzes each TARGET (h2_frame, hpack, h2_conn; default all) for N minutes.
  --minutes N   time per target (default 1)
  --out FILE    append each target's summary to FILE
USAGE
}

minutes=1
out=""
targets=()
while (($#)); do
	case $1 in
	--minutes)
		need_value "$@"
		need_uint "$1" "$2" 1
		minutes=$2
		shift 2
		;;
	--out)
		need_value "$@"
		out=$2
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	-*) die "unknown option $1 (see --help)" ;;
	*)
		targets+=("$1")
		shift
		;;
	esac
done
((${#targets[@]})) || targets=(h2_frame hpack h2_conn)

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
	echo "fuzz: SKIPPED (no nightly toolchain: rustup toolchain install nightly)"
	exit 0
fi
tools=$repo/target/tools/cargo-fuzz
if [[ ! -x $tools/bin/cargo-fuzz ]]; then
	log "installing cargo-fuzz into $tools"
	cargo install cargo-fuzz --locked --root "$tools" >&2
fi
export PATH=$tools/bin:$PATH

cd "$repo"
for t in "${targets[@]}"; do
	[[ -f fuzz/fuzz_targets/$t.rs ]] || die "no fuzz target '$t' (fuzz/fuzz_targets/)"
	corpus=fuzz/corpus/$t
	mkdir -p "$corpus" "fuzz/artifacts/$t"
	seeds=()
	[[ -d fuzz/seeds/$t ]] && seeds=("fuzz/seeds/$t")
	log "$t: $minutes min"
	log_file=$(mktemp)
	status=0
	cargo +nightly fuzz run "$t" "$corpus" "${seeds[@]}" -- \
		-max_total_time=$((minutes * 60)) -print_final_stats=1 >"$log_file" 2>&1 || status=$?
	summary=$({ grep -E '^(#[0-9]+.*DONE|Done [0-9]+ runs|stat::new_units_added|stat::peak_rss_mb)' "$log_file" || true; } | tail -4)
	printf '%s (%s min, exit %s):\n%s\n' "$t" "$minutes" "$status" "$summary"
	[[ -n $out ]] && printf '%s (%s min, exit %s):\n%s\n' "$t" "$minutes" "$status" "$summary" >>"$out"
	if ((status != 0)); then
		tail -40 "$log_file" >&2
		rm -f "$log_file"
		die "$t failed: see fuzz/artifacts/$t"
	fi
	rm -f "$log_file"
done
