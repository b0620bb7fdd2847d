#!/usr/bin/env bash
# Run tests/ktls.rs where a kernel seals TLS records: in the VM of
# scripts/ktls-vm.sh (Debian's kernel, CONFIG_TLS=m), since the kernel CI
# and this machine run has no `tls` ULP and prints SKIPPED for the
# kernel-path cases.
#
# Flow: build the test binary and the server binary it spawns (cargo test
# --no-run), then run the test binary in the VM with the server copied in at
# the same path. Extra arguments go to the test binary (a filter,
# --nocapture). Exit status: the tests'; 77 when the VM cannot be had.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

built=$(cargo test --no-run --test ktls --message-format=json 2>/dev/null)
pick() {
	python3 -c '
import json, sys
want = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kinds = m["target"]["kind"]
    if m["target"]["name"] == want and (("test" in kinds) == (want == "ktls")):
        print(m["executable"])
' "$1"
}
tests=$(pick ktls <<<"$built")
server=$(pick servery <<<"$built")
[[ -x $tests && -x $server ]] || {
	echo "ktls-tests: cannot find the built test ($tests) or server ($server)" >&2
	exit 1
}
KTLS_VM_FILES=$server exec scripts/ktls-vm.sh -- "$tests" --test-threads 1 "$@"
