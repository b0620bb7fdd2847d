#!/usr/bin/env bash
# TLS scan of servery's TLS listener with sslscan (testssl.sh as fallback).
#
# Flow:
#   1. The scanner: sslscan if on PATH, else installed with apt-get (Debian
#      package `sslscan`); if that is impossible, testssl.sh (on PATH as
#      `testssl` or `testssl.sh`, else the Debian package `testssl.sh`).
#      TLS_SCANNER=sslscan|testssl forces one.
#   2. Use target/release/servery (built with cargo if it is missing), or
#      $SERVERY_BIN.
#   3. Start `servery serve ROOT --tls-bind 127.0.0.1:PORT --tls-self-signed
#      --no-pin` on a free port (port 0, read back from the ready line).
#   4. Scan 127.0.0.1:PORT, print the scanner's report, then judge it from
#      its machine-readable output (sslscan XML, testssl.sh JSON) by the
#      policy below, printing each finding.
#   5. Stop the server and remove the temp files (trap, on any exit).
#
# Policy (a finding fails the run):
#   - a protocol below TLS 1.2 enabled (SSLv2, SSLv3, TLS 1.0, TLS 1.1), or
#     neither TLS 1.2 nor TLS 1.3 enabled (the scan did not work);
#   - any accepted cipher that sslscan marks other than strong/acceptable
#     (null, anonymous, export/weak, medium: RC4, DES/3DES, SM4, GOST) or
#     with under 112 bits; with testssl.sh, any of its NULL, aNULL, EXPORT,
#     LOW, 3DES/IDEA or AVERAGE/OBSOLETED cipher lists offered;
#   - stricter than sslscan: any CBC suite or SHA-1 MAC (e.g.
#     ECDHE-RSA-AES128-SHA), RSA key exchange or MD5. sslscan marks these
#     "acceptable" under TLS 1.2, but rustls implements none of them, so one
#     appearing means the server's crypto changed and someone should look;
#   - insecure renegotiation, TLS compression, Heartbleed;
#   - a certificate signed with MD5/SHA-1, an RSA key under 2048 bits or an
#     EC key under 128-bit strength, or an expired certificate. The
#     self-signed certificate itself is expected (--tls-self-signed) and is
#     not a finding.
#
# Exit status: 0 no finding; 1 at least one finding; 2 no scanner could be
# installed or servery could not start.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [-- SERVE_FLAGS...]

Scans servery's TLS listener (--tls-self-signed on 127.0.0.1) with sslscan,
or testssl.sh where sslscan cannot be had, and fails on protocols below
TLS 1.2 or weak ciphers (see the policy at the top of this script). Flags
after -- go to 'servery serve' (e.g. -- --workers 2 --isolation process).

Environment:
  TLS_SCANNER  sslscan or testssl               (default: sslscan, else testssl)
  SERVERY_BIN  the binary to scan               (default target/release/servery,
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

# apt_install PKG: install a Debian package, quietly; false if impossible.
apt_updated=
apt_install() {
	command -v apt-get >/dev/null 2>&1 || return 1
	local sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null 2>&1 || return 1
		sudo=(sudo -n)
	fi
	if [[ -z $apt_updated ]]; then
		"${sudo[@]}" apt-get update -qq >/dev/null 2>&1 || return 1
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "$1" >/dev/null 2>&1
}

# 1. The scanner.
testssl_cmd() {
	command -v testssl 2>/dev/null || command -v testssl.sh 2>/dev/null
}
scanner=
want=${TLS_SCANNER:-}
case $want in
'' | sslscan | testssl) ;;
*) setup_fail "TLS_SCANNER must be sslscan or testssl, not '$want'" ;;
esac
if [[ $want != testssl ]]; then
	if ! command -v sslscan >/dev/null 2>&1; then
		log "installing sslscan (Debian package)"
		apt_install sslscan || warn "cannot install sslscan with apt-get"
	fi
	command -v sslscan >/dev/null 2>&1 && scanner=sslscan
fi
if [[ -z $scanner && $want != sslscan ]]; then
	if ! testssl_cmd >/dev/null; then
		log "installing testssl.sh (Debian package)"
		apt_install testssl.sh || warn "cannot install testssl.sh with apt-get"
	fi
	testssl_cmd >/dev/null && scanner=testssl
fi
[[ -n $scanner ]] ||
	setup_fail "no TLS scanner: install sslscan or testssl.sh (Debian: apt-get install sslscan)"
command -v python3 >/dev/null 2>&1 ||
	setup_fail "python3 is needed to read the scanner's report"

# 2. servery.
bin=${SERVERY_BIN:-$repo/target/release/servery}
if [[ ! -x $bin ]]; then
	[[ -z ${SERVERY_BIN:-} ]] || setup_fail "SERVERY_BIN=$bin is not an executable"
	log "building $bin"
	(cd "$repo" && cargo build --release --bin servery) ||
		setup_fail "cannot build servery (cargo build --release --bin servery)"
fi

# 3. Docroot and server; everything below is removed on exit.
work=$(mktemp -d "${TMPDIR:-/tmp}/servery-tls-scan.XXXXXX")
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
printf 'hello over tls\n' >"$root/index.html"

"$bin" serve "$root" --tls-bind 127.0.0.1:0 --tls-self-signed --no-pin "${serve_flags[@]}" \
	>"$work/stdout" 2>"$work/stderr" &
server_pid=$!
if ! wait_line "$work/stdout" '^servery: ready on .*https://' 10 "$server_pid"; then
	cat "$work/stderr" >&2
	setup_fail "servery did not become ready ($bin)"
fi
ready=$(grep -m1 -E '^servery: ready on ' "$work/stdout")
addr=${ready#*https://}
addr=${addr%% *}
fingerprint=${ready##*tls sha256 }

# 4. Scan and judge.
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
case $scanner in
sslscan) scanner_version=$(sslscan --version 2>/dev/null | grep -m1 -oE '[0-9]+\.[0-9]+\.[0-9]+' || true) ;;
testssl) scanner_version=$("$(testssl_cmd)" --version 2>/dev/null | grep -m1 -oE '[0-9]+\.[0-9][0-9.a-z+~-]*' || true) ;;
esac
printf '%s %s against %s (%s, sha256 %.16s, tree at %s)\n' \
	"$scanner" "${scanner_version:-?}" "$addr" "$bin" \
	"$(sha256sum "$bin" | cut -d' ' -f1)" "$commit"
printf 'serve flags: --tls-self-signed%s\n' "${serve_flags[*]:+ ${serve_flags[*]}}"
printf 'certificate sha256 %s\n\n' "$fingerprint"

case $scanner in
sslscan)
	timeout 300 sslscan --no-colour --xml="$work/scan.xml" "$addr" | tee "$work/scan.txt" ||
		setup_fail "sslscan failed against $addr"
	report=$work/scan.xml
	;;
testssl)
	timeout 600 "$(testssl_cmd)" --quiet --color 0 --warnings batch --protocols --std \
		--jsonfile "$work/scan.json" "$addr" | tee "$work/scan.txt" ||
		setup_fail "testssl.sh failed against $addr"
	report=$work/scan.json
	;;
esac

cat >"$work/judge.py" <<'PY'
"""Apply the policy at the top of tls-scan.sh to a scanner's report."""
import json
import re
import sys

scanner, path = sys.argv[1], sys.argv[2]
findings = []
# Names rustls never offers; see the policy (CBC and SHA-1 MACs, RSA key
# exchange, MD5) and the classic weak families.
STRICT = re.compile(r"CBC|-SHA$|_SHA$|MD5|RC4|DES|NULL|EXP|anon|ADH|AECDH|"
                    r"^AES|^CAMELLIA|^ARIA|^SEED|^IDEA|^TLS_RSA_")


def sslscan(path):
    import xml.etree.ElementTree as ET
    test = ET.parse(path).getroot().find("ssltest")
    if test is None:
        findings.append("sslscan wrote no <ssltest> result")
        return
    enabled = {}
    for p in test.findall("protocol"):
        name = f"{p.get('type').upper()}v{p.get('version')}"
        enabled[name] = p.get("enabled") == "1"
        if enabled[name] and name not in ("TLSv1.2", "TLSv1.3"):
            findings.append(f"protocol {name} is enabled")
    if not (enabled.get("TLSv1.2") or enabled.get("TLSv1.3")):
        findings.append("neither TLS 1.2 nor TLS 1.3 is enabled: did the scan work?")
    reneg = test.find("renegotiation")
    if reneg is not None and reneg.get("supported") == "1" and reneg.get("secure") != "1":
        findings.append("insecure session renegotiation is supported")
    comp = test.find("compression")
    if comp is not None and comp.get("supported") == "1":
        findings.append("TLS compression is supported (CRIME)")
    for hb in test.findall("heartbleed"):
        if hb.get("vulnerable") == "1":
            findings.append(f"{hb.get('sslversion')} is vulnerable to Heartbleed")
    ciphers = test.findall("cipher")
    if not ciphers:
        findings.append("no cipher accepted: did the scan work?")
    for c in ciphers:
        name, version = c.get("cipher"), c.get("sslversion")
        strength, bits = c.get("strength"), int(c.get("bits", "0"))
        if strength not in ("strong", "acceptable"):
            findings.append(f"{version} {name}: sslscan marks it {strength}")
        elif bits < 112:
            findings.append(f"{version} {name}: {bits}-bit")
        elif version != "TLSv1.3" and STRICT.search(name):
            findings.append(f"{version} {name}: CBC, SHA-1 MAC, RSA key exchange or "
                            "a weak family (policy: rustls offers none)")
    for g in test.findall("group"):
        if int(g.get("bits", "0")) < 112:
            findings.append(f"key exchange group {g.get('name')}: {g.get('bits')}-bit")
    for cert in test.iter("certificate"):
        sig = (cert.findtext("signature-algorithm") or "").lower()
        if "md5" in sig or "sha1" in sig:
            findings.append(f"certificate signed with {sig}")
        pk = cert.find("pk")
        if pk is not None and pk.get("error") != "true":
            bits = int(pk.get("bits", "0"))
            if pk.get("type") == "RSA" and bits < 2048:
                findings.append(f"RSA certificate key of {bits} bits")
            if pk.get("type") == "EC" and bits < 128:
                findings.append(f"EC certificate key of {bits}-bit strength")
        if (cert.findtext("expired") or "").strip() == "true":
            findings.append("the certificate has expired")


def testssl(path):
    with open(path, encoding="utf-8") as f:
        items = json.load(f)
    if isinstance(items, dict):  # --jsonfile-pretty shape
        items = [f for s in items.get("scanResult", []) for v in s.values()
                 if isinstance(v, list) for f in v]
    by_id = {i.get("id"): i for i in items}
    offered = lambda i: re.match(r"^offered", i.get("finding", "")) is not None
    for pid in ("SSLv2", "SSLv3", "TLS1", "TLS1_1"):
        i = by_id.get(pid)
        if i is not None and offered(i):
            findings.append(f"protocol {pid} is offered")
    if not any(by_id.get(p) is not None and offered(by_id[p]) for p in ("TLS1_2", "TLS1_3")):
        findings.append("neither TLS 1.2 nor TLS 1.3 is offered: did the scan work?")
    for i in items:
        iid = i.get("id", "")
        if iid.startswith("cipherlist_") and not iid.startswith("cipherlist_STRONG") and offered(i):
            findings.append(f"{iid}: {i.get('finding')}")
        if i.get("severity") in ("HIGH", "CRITICAL"):
            findings.append(f"{iid} [{i.get('severity')}]: {i.get('finding')}")


try:
    {"sslscan": sslscan, "testssl": testssl}[scanner](path)
except (OSError, ValueError) as e:
    print(f"cannot read the {scanner} report: {e}")
    sys.exit(1)
print()
if findings:
    print(f"Policy: {len(findings)} finding(s)")
    for f in findings:
        print(f"  FAIL {f}")
    sys.exit(1)
print("Policy: pass (TLS 1.2+ only; no weak, CBC, SHA-1-MAC or RSA-key-exchange suite)")
PY

status=0
python3 "$work/judge.py" "$scanner" "$report" || status=1

# What the server logged while being scanned (deduplicated, counted).
if [[ -s $work/stderr ]]; then
	printf '\nservery logged during the scan (count, message without timestamp):\n'
	sed -E 's/\x1b\[[0-9;]*m//g; s/^[0-9T:.Z-]+ +//' "$work/stderr" | sort | uniq -c | sort -rn | head -20
fi
if ! kill -0 "$server_pid" 2>/dev/null; then
	printf 'servery exited during the scan\n'
	status=1
fi
exit "$status"
