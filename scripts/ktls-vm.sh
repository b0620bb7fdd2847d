#!/usr/bin/env bash
# Run one command inside a throwaway VM whose kernel has kernel TLS (kTLS).
#
# Why: the host kernel may lack CONFIG_TLS (our 6.18 Firecracker kernel does),
# so setsockopt(TCP_ULP, "tls") fails there and kTLS cannot be tested. Debian
# bookworm's kernel has CONFIG_TLS=m: this boots it under qemu with a tiny
# initramfs and runs COMMAND in it.
#
# Flow:
#   1. qemu-system-x86 via apt-get install; busybox-static and the kernel
#      (linux-image-cloud-amd64's versioned package, else linux-image-amd64's)
#      via apt-get download + dpkg-deb -x into a cache, never installed.
#   2. Initramfs: busybox, tls.ko and the AEAD modules its ciphers need,
#      COMMAND and each ARG that is an absolute path to a host executable,
#      plus KTLS_VM_FILES, at their host paths with their ldd libraries.
#   3. /init mounts proc/sys/dev/tmp, brings up lo, insmods tls, sets
#      ulimit -n 65536, prints tcp_available_ulp, runs COMMAND, prints
#      `KTLS-VM-EXIT <code>` and powers off. The console streams to stdout.
#
# Environment: KTLS_VM_FILES (colon-separated extra host paths to copy),
# KTLS_VM_ENV (space-separated NAME=VALUE pairs exported in the VM),
# KTLS_VM_MEM (2G), KTLS_VM_CPUS (2), KTLS_VM_TIMEOUT (600 s), KTLS_VM_ACCEL
# (kvm|tcg; detected by default). Exit status: COMMAND's; 2 if the VM died
# without reporting one (or timed out); 77 (SKIPPED) if a package is missing.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"

usage() {
	cat <<USAGE
usage: ${0##*/} [--keep DIR] -- COMMAND [ARGS...]
Boots Debian bookworm's kernel (CONFIG_TLS=m) under qemu and runs COMMAND in it.
  --keep DIR   build the initramfs in DIR and keep it (and console.log) there
USAGE
}

keep=""
while (($#)); do
	case $1 in
	--keep) need_value "$1" "${2:-}" && keep=$2 && shift ;;
	-h | --help) usage && exit 0 ;;
	--) shift && break ;;
	-*) usage >&2 && exit 2 ;;
	*) break ;;
	esac
	shift
done
(($#)) || { usage >&2 && exit 2; }

skip() { printf 'SKIPPED: %s\n' "$*" && exit 77; }
sudo=()
((EUID == 0)) || sudo=(sudo)
# apt_retry CMD...: run CMD; if it fails, apt-get update (lists may be stale) and retry once.
apt_retry() {
	"$@" && return 0
	log "apt-get update, then try again"
	"${sudo[@]}" apt-get update -qq >&2 && "$@"
}

cache=${XDG_CACHE_HOME:-$HOME/.cache}/servery/ktls-vm
mkdir -p "$cache"
# extract_pkg PKG: print a directory holding PKG's files (apt-get download, dpkg-deb -x; cached).
extract_pkg() {
	local pkg=$1 dir=$cache/$1 dl
	if [[ ! -e $dir/.complete ]]; then
		# apt-get download drops to the _apt user, which must be able to read here.
		dl=$(mktemp -d "$cache/dl.XXXXXX") && chmod 755 "$dl"
		log "apt-get download $pkg (into $cache)"
		(cd "$dl" && apt_retry apt-get download "$pkg" >&2) || { rm -rf "$dl" && return 1; }
		rm -rf "$dir" && dpkg-deb -x "$dl"/*.deb "$dir" && touch "$dir/.complete"
		rm -rf "$dl"
	fi
	printf '%s\n' "$dir"
}

# 1. qemu, busybox and a kernel with CONFIG_TLS.
need_cmd apt-get "this script fetches Debian packages"
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
	((EUID == 0)) || command -v sudo >/dev/null 2>&1 || skip "qemu-system-x86_64 missing and no root to install it"
	log "apt-get install qemu-system-x86"
	# --no-remove: never trade a package already here for qemu.
	apt_retry "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-remove qemu-system-x86 >&2 ||
		skip "cannot install qemu-system-x86 (without removing packages)"
fi
busybox=$(extract_pkg busybox-static)/bin/busybox || skip "cannot fetch busybox-static"

kdir="" kver=""
for meta in linux-image-cloud-amd64 linux-image-amd64; do
	pkg=$(apt_retry apt-cache depends "$meta" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }') || true
	[[ -n $pkg ]] || { warn "cannot resolve $meta" && continue; }
	dir=$(extract_pkg "$pkg") || { warn "cannot fetch $pkg" && continue; }
	config=$(find "$dir/boot" -name 'config-*' -print -quit)
	if [[ -n $config ]] && grep -Eq '^CONFIG_TLS=[my]$' "$config"; then
		kdir=$dir kver=${config##*/config-} && break
	fi
	warn "$pkg has no CONFIG_TLS; trying the next kernel"
done
[[ -n $kdir ]] || skip "no Debian kernel package with CONFIG_TLS could be fetched"
log "kernel $kver ($kdir)"

# 2. The initramfs, in a temp dir (or --keep DIR).
if [[ -n $keep ]]; then
	work=$(mkdir -p "$keep" && cd "$keep" && pwd) && rm -rf "$work/root"
else
	work=$(mktemp -d)
	# shellcheck disable=SC2317 # called by the trap
	cleanup() { rm -rf "$work"; }
	trap cleanup EXIT
fi
root=$work/root
mkdir -p "$root"/{ktls-vm/bin,ktls-vm/modules,proc,sys,dev,tmp,etc,root}
# Mirror merged-/usr links (/lib -> usr/lib) so host paths resolve alike.
for d in bin sbin lib lib32 lib64 libx32; do
	t=$(readlink "/$d" 2>/dev/null) || continue
	if [[ $t != /* ]]; then mkdir -p "$root/$t" && ln -s "$t" "$root/$d"; fi
done
cp "$busybox" "$root/ktls-vm/busybox"

# copy_in PATH: copy the host file PATH to the same path, with its libraries if executable.
copy_in() {
	local src=$1 lib
	[[ -e $root$src ]] && return 0
	mkdir -p "$root$(dirname "$src")" && cp -rL "$src" "$root$src"
	[[ -f $src && -x $src ]] || return 0
	while read -r lib; do
		[[ -n $lib ]] && copy_in "$lib"
	done < <(ldd "$src" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
	if ldd "$src" 2>/dev/null | grep 'not found' >&2; then warn "$src: libraries missing on the host"; fi
}
for a in "$@"; do
	if [[ $a == /* && -f $a && -x $a ]]; then copy_in "$a"; fi
done
IFS=: read -ra extra <<<"${KTLS_VM_FILES:-}"
for f in "${extra[@]}"; do
	[[ -n $f ]] || continue
	[[ $f == /* && -e $f ]] || die "KTLS_VM_FILES: '$f' is not an absolute path to an existing file"
	copy_in "$f"
done
if [[ -f /etc/ld.so.cache ]]; then cp /etc/ld.so.cache "$root/etc/"; fi
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
printf 'hosts: files\n' >"$root/etc/nsswitch.conf"

# The tls module, and the AEADs its ciphers ask the crypto API for by name
# (gcm(aes), ccm(aes), rfc7539(chacha20,poly1305)): the VM has no modprobe to
# load them on demand, and without them setsockopt(TLS_TX/TLS_RX) fails ENOENT.
# Debian's package ships no modules.dep (depmod writes it on install), so each
# module's dependencies come from its own .modinfo depends=.
modules=()
moddir=$(find "$kdir" -maxdepth 3 -type d -path "*/modules/$kver")
# add_module NAME: copy NAME.ko (decompressed) into the initramfs after its
# dependencies; nothing if it is built in. '-' and '_' in NAME are the same.
add_module() {
	local name=${1//-/_} pat=${1//[_-]/[_-]} f d
	[[ " ${modules[*]} " == *" $name "* ]] && return 0
	grep -Eq "/$pat\.ko" "$moddir/modules.builtin" && return 0
	f=$(find "$moddir" -name "$pat.ko*" -print -quit)
	[[ -n $f ]] || die "module $name not found under $moddir"
	case $f in
	*.xz) xz -dc "$f" ;; *.zst) zstd -qdc "$f" ;; *.gz) gzip -dc "$f" ;; *) cat "$f" ;;
	esac >"$root/ktls-vm/modules/$name.ko"
	for d in $(tr '\0' '\n' <"$root/ktls-vm/modules/$name.ko" | sed -n 's/^depends=//p' | head -n1 | tr ',' ' '); do
		add_module "$d"
	done
	modules+=("$name")
}
for m in tls gcm ghash_generic ctr ccm chacha20poly1305 chacha_generic poly1305_generic \
	aesni_intel ghash_clmulni_intel chacha_x86_64 poly1305_x86_64; do
	add_module "$m"
done

# sq ARG: ARG single-quoted for sh.
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
	cat <<'INIT'
#!/ktls-vm/busybox sh
bb=/ktls-vm/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sysfs /sys
$bb mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
# Files copied under /tmp (a test binary built there) move onto the tmpfs.
$bb mkdir /ktls-vm/tmp && $bb mount -t tmpfs tmpfs /ktls-vm/tmp
for f in /tmp/* /tmp/.[!.]*; do [ -e "$f" ] && $bb mv "$f" /ktls-vm/tmp/; done
$bb mount --move /ktls-vm/tmp /tmp
$bb --install -s /ktls-vm/bin
$bb ip link set lo up
INIT
	for m in "${modules[@]}"; do
		echo "\$bb insmod /ktls-vm/modules/$m.ko || echo 'ktls-vm: insmod $m failed'"
	done
	cat <<'INIT'
ulimit -n 65536
export HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin:/ktls-vm/bin
echo "tcp_available_ulp: $($bb cat /proc/sys/net/ipv4/tcp_available_ulp)"
cd /tmp
INIT
	read -ra pairs <<<"${KTLS_VM_ENV:-}"
	for p in "${pairs[@]}"; do
		[[ $p == [A-Za-z_]*=* ]] || die "KTLS_VM_ENV: '$p' is not NAME=VALUE"
		printf 'export %s=%s\n' "${p%%=*}" "$(sq "${p#*=}")"
	done
	for a in "$@"; do printf '%s ' "$(sq "$a")"; done
	cat <<'INIT'

rc=$?
echo "KTLS-VM-EXIT $rc"
$bb poweroff -f
INIT
} >"$root/init"
chmod 755 "$root/init"

cpio=(cpio -o -H newc --quiet)
command -v cpio >/dev/null 2>&1 || cpio=("$busybox" cpio -o -H newc)
(cd "$root" && find . | "${cpio[@]}") >"$work/initramfs.cpio"
log "initramfs $(du -h "$work/initramfs.cpio" | cut -f1)"

# 3. Boot it and stream the console. KVM needs /dev/kvm and hardware
# virtualisation (vmx/svm): a /dev/kvm without it (kvm_pvm, a paravirtual KVM
# for nested guests) stops a stock kernel with "KVM internal error ...
# emulation failure" (cmpxchg16b, xrstor) and qemu hangs until the timeout.
how=${KTLS_VM_ACCEL:-}
if [[ -z $how ]]; then
	how=tcg
	if [[ -c /dev/kvm ]] && (exec 3<>/dev/kvm) 2>/dev/null && grep -qwE 'vmx|svm' /proc/cpuinfo; then
		how=kvm
	else
		log "note: no /dev/kvm with vmx/svm to use; emulating with TCG (slower)"
	fi
fi
case $how in
kvm) accel=(-enable-kvm -cpu host) ;;
tcg) accel=(-accel tcg -cpu max) ;;
*) die "KTLS_VM_ACCEL must be kvm or tcg, got '$how'" ;;
esac
log "booting $how, ${KTLS_VM_CPUS:-2} CPUs, ${KTLS_VM_MEM:-2G} RAM, timeout ${KTLS_VM_TIMEOUT:-600}s"
start=$SECONDS qrc=0
timeout -k 5 "${KTLS_VM_TIMEOUT:-600}" qemu-system-x86_64 "${accel[@]}" \
	-m "${KTLS_VM_MEM:-2G}" -smp "${KTLS_VM_CPUS:-2}" -nodefaults -no-user-config \
	-display none -serial stdio -no-reboot \
	-kernel "$kdir/boot/vmlinuz-$kver" -initrd "$work/initramfs.cpio" \
	-append "console=ttyS0 quiet panic=-1" </dev/null |
	sed -u 's/\r$//' | tee "$work/console.log" || qrc=${PIPESTATUS[0]}
if ((qrc == 124 || qrc == 137)); then warn "VM killed after ${KTLS_VM_TIMEOUT:-600}s"; fi
log "VM ran $((SECONDS - start))s"
code=$(grep -aoE 'KTLS-VM-EXIT [0-9]+$' "$work/console.log" | tail -n1 | cut -d' ' -f2) || true
[[ -n $code ]] || { warn "the VM died without a KTLS-VM-EXIT line (qemu status $qrc)" && exit 2; }
exit "$code"
