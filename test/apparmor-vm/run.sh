#!/bin/sh
# The AppArmor profile, live: a virtual machine (KVM, else QEMU's
# emulator) running Debian 13's own kernel (6.12, AppArmor enabled) and
# AppArmor 4 userspace, booted from a root file system built offline from
# Debian's packages.  Inside it, as root and as an unprivileged user,
# test/apparmor-vm/check.py loads the profile, runs the installed package
# under it and checks from outside the sandbox what the profile grants (see
# check.py).  The host's own kernel may lack AppArmor.
#
#   test/apparmor-vm/run.sh        (make apparmor-vm; root; /dev/kvm if there)
#
# Cached under build/apparmor-vm/ (nothing here is committed):
#   rootfs/        debootstrap of trixie with the kernel, apparmor, the build
#                  and runtime dependencies; made once, again when the package
#                  list below changes (rootfs.ok holds it)
#   disk.img       the root file system as an ext4 image, made on each run
#   serial.log     the VM's console: the checks' output
# On each run the working tree's tracked files are copied into rootfs/src,
# built there (make all, make deb: Debian 13's Python 3.13, not the host's)
# and the package installed with dpkg, so the VM runs what the package ships.
# MIRROR overrides the mirror; VM_ACCEL (auto, kvm, tcg: see below) the
# accelerator; VM_TIMEOUT (seconds, default 1800) bounds the
# boot and the checks together.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=$top/build/apparmor-vm
rootfs=$out/rootfs
mirror=${MIRROR:-http://deb.debian.org/debian}
suite=trixie
vm_timeout=${VM_TIMEOUT:-1800}

[ "$(id -u)" = 0 ] || { echo "apparmor-vm: run as root (debootstrap, chroot, /dev/kvm)" >&2; exit 2; }
if [ ! -c /dev/kvm ] && [ "${VM_ACCEL:-auto}" = auto ]; then
	echo "apparmor-vm: no /dev/kvm: QEMU's emulator runs the VM" >&2
	VM_ACCEL=tcg
fi
missing=
for t in qemu-system-x86_64:qemu-system-x86 debootstrap:debootstrap mke2fs:e2fsprogs git:git; do
	command -v "${t%%:*}" >/dev/null 2>&1 || missing="$missing ${t#*:}"
done
if [ -n "$missing" ]; then
	echo "apparmor-vm: installing$missing" >&2
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $missing >&2
fi

# The kernel, AppArmor and its tools, what the checks use (capsh, unshare,
# setpriv, ip), the build dependencies (packaging/debian/control) and the
# package's own (python3-numpy, -pandas, -matplotlib, -pil).
pkgs="linux-image-amd64 initramfs-tools kmod apparmor apparmor-utils libcap2-bin util-linux mount iproute2
passwd procps python3 python3-numpy python3-pandas python3-matplotlib python3-pil
gcc make pkg-config libc6-dev libcjson-dev libseccomp-dev libbsd-dev libmd-dev libexpat1-dev libyaml-dev libxxhash-dev
libssl-dev libpython3-dev dpkg-dev"
want="$suite $(echo $pkgs)"

now() { date +%s; }
t0=$(now)
in_root() { chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 "$@"; }
qpid=
cleanup() {
	[ -z "$qpid" ] || kill "$qpid" 2>/dev/null || true
	for m in proc dev/pts dev; do umount "$rootfs/$m" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

if [ "$(cat "$out/rootfs.ok" 2>/dev/null)" != "$want" ]; then
	cleanup
	rm -rf "$rootfs" "$out/rootfs.ok"
	mkdir -p "$out/debs" "$rootfs"
	echo "apparmor-vm: debootstrap $suite (minbase + the kernel, apparmor, the build) into $rootfs" >&2
	debootstrap --variant=minbase --cache-dir="$out/debs" --include="$(echo $pkgs | tr ' ' ,)" \
		"$suite" "$rootfs" "$mirror" > "$out/debootstrap.log" 2>&1 || {
		tail -20 "$out/debootstrap.log" >&2
		echo "apparmor-vm: debootstrap failed (log: $out/debootstrap.log)" >&2
		exit 1
	}
	# The unprivileged user of the checks; a root file system the kernel
	# mounts read-write; a host name.
	in_root useradd -m -u 1000 -s /bin/sh tester
	echo '/dev/vda / ext4 rw 0 1' > "$rootfs/etc/fstab"
	echo aavm > "$rootfs/etc/hostname"
	rm -f "$rootfs"/var/cache/apt/archives/*.deb
	echo "$want" > "$out/rootfs.ok"
fi
t1=$(now)

# The working tree's tracked files, built for Debian 13 and installed as
# the package.  A build of an earlier run is kept (make rebuilds what
# changed).
echo "apparmor-vm: building the package inside the $suite root" >&2
mkdir -p "$rootfs/src"
(cd "$top" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - --no-recursion 2>/dev/null) |
	tar -C "$rootfs/src" -xf -
mount -t proc proc "$rootfs/proc"
# The release's own flags, without the project's -Werror: a warning that a
# newer compiler or library adds must not stop the profile's test (Debian
# 13's expat deprecates calls files/validate.c keeps for Debian 12).
cflags='-g -O2 -D_FORTIFY_SOURCE=2 -Wno-error=deprecated-declarations'
in_root sh -c "cd /src && make -j\$(nproc) CFLAGS='$cflags' all >/src/build-vm.log 2>&1 &&
	make CFLAGS='$cflags' deb >>/src/build-vm.log 2>&1" || {
	tail -30 "$rootfs/src/build-vm.log" >&2
	echo "apparmor-vm: the build inside the $suite root failed (log: $rootfs/src/build-vm.log)" >&2
	exit 1
}
deb=$(cd "$rootfs/src" && ls build/python-sandbox-mcp_*.deb | tail -1)
in_root dpkg -i "/src/$deb" > "$out/dpkg.log" 2>&1 || {
	cat "$out/dpkg.log" >&2
	echo "apparmor-vm: dpkg -i $deb failed inside the root" >&2
	exit 1
}
umount "$rootfs/proc" 2>/dev/null || true
install -D -m 0755 "$here/init" "$rootfs/usr/local/lib/aavm/init"
install -D -m 0755 "$here/check.py" "$rootfs/usr/local/lib/aavm/check.py"
t2=$(now)

# The disk: the root as ext4, sized with room for the checks' files.
kernel=$(ls "$rootfs"/boot/vmlinuz-* | sort -V | tail -1)
initrd=$(ls "$rootfs"/boot/initrd.img-* | sort -V | tail -1)
size=$(( $(du -sm "$rootfs" | cut -f1) + 1024 ))
rm -f "$out/disk.img"
mke2fs -q -t ext4 -L aavm -d "$rootfs" "$out/disk.img" "${size}M"
t3=$(now)

# The kernel uncompressed, booted at its PVH entry: the bzImage's own
# decompressor (zstd, with BMI2 instructions) stops a nested KVM ("KVM
# internal error ... emulation failure": a hypervisor that runs inside
# another, as CI machines often do, cannot emulate them), and the PVH entry
# skips it.
vmlinux=$out/vmlinux
if [ ! -s "$vmlinux" ] || [ "$kernel" -nt "$vmlinux" ]; then
	off=$(LC_ALL=C grep -abo "$(printf '\050\265\057\375')" "$kernel" | head -1 | cut -d: -f1)
	[ -n "$off" ] || { echo "apparmor-vm: $kernel is not zstd-compressed: cannot extract its vmlinux" >&2; exit 1; }
	command -v zstd >/dev/null 2>&1 || apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends zstd >&2
	tail -c +$((off + 1)) "$kernel" | zstd -dcq > "$vmlinux.part" 2>/dev/null || true
	[ -s "$vmlinux.part" ] && mv "$vmlinux.part" "$vmlinux" ||
		{ echo "apparmor-vm: cannot extract vmlinux from $kernel" >&2; exit 1; }
fi

# Boot: the console on the first serial port (into serial.log), init the
# checks' script, which powers the VM off; the disk as built on each boot
# (snapshot=on: writes stay in memory).  lsm= names AppArmor explicitly
# (Debian's default order has it already).  VM_ACCEL: kvm, tcg (QEMU's
# emulator: no KVM needed, about 2 minutes here) or auto (the default: KVM,
# then the emulator if KVM cannot run this kernel: a nested KVM, as on
# machines that are VMs themselves, can fail to emulate an instruction
# ("KVM internal error ... emulation failure"); QEMU then stops and waits,
# so the run watches for it).
log=$out/serial.log
qerr=$out/qemu.log
boot() {
	case $1 in
	kvm) accel='-enable-kvm -cpu host' ;;
	tcg) accel='-accel tcg,thread=multi -cpu max' ;;
	esac
	echo "apparmor-vm: booting $(basename "$kernel") under $1 (at most ${vm_timeout}s)" >&2
	rm -f "$log"
	: > "$qerr"
	start=$(now)
	qemu-system-x86_64 $accel -smp 2 -m 3072 \
		-kernel "$vmlinux" -initrd "$initrd" \
		-append "root=/dev/vda rw console=ttyS0 init=/usr/local/lib/aavm/init lsm=landlock,lockdown,yama,apparmor,bpf panic=-1 quiet" \
		-drive file="$out/disk.img",format=raw,if=virtio,snapshot=on -nic none \
		-display none -monitor none -serial file:"$log" -no-reboot >> "$qerr" 2>&1 &
	qpid=$!
	rc=0
	while kill -0 "$qpid" 2>/dev/null; do
		if grep -q 'KVM internal error' "$qerr"; then
			rc=kvm
		elif [ $(($(now) - start)) -gt "$vm_timeout" ]; then
			rc=timeout
		fi
		if [ "$rc" != 0 ]; then
			kill "$qpid" 2>/dev/null || true
			break
		fi
		sleep 1
	done
	wait "$qpid" 2>/dev/null || true
	qpid=
}
accel_used=${VM_ACCEL:-auto}
case $accel_used in
kvm|tcg) boot "$accel_used" ;;
auto)
	accel_used=kvm
	boot kvm
	if [ "$rc" = kvm ]; then
		echo "apparmor-vm: KVM could not run the VM ($(grep -m1 -o 'emulation failure\|KVM internal error.*' "$qerr")): again under QEMU's emulator" >&2
		accel_used=tcg
		boot tcg
	fi ;;
*) echo "apparmor-vm: VM_ACCEL is auto, kvm or tcg" >&2; exit 2 ;;
esac
t4=$(now)
# The console ends its lines with \r\n.
tr -d '\r' < "$log" | sed -n '/^aavm: /p'
echo "apparmor-vm: timings: root file system $((t1 - t0))s, build and install $((t2 - t1))s, disk image $((t3 - t2))s, boot and checks $((t4 - t3))s under $accel_used (log: $log)"
case $rc in
kvm) head -20 "$qerr" >&2; echo "apparmor-vm: KVM could not run the VM (log: $qerr)" >&2; exit 1 ;;
timeout) echo "apparmor-vm: the VM did not power off within ${vm_timeout}s" >&2; exit 1 ;;
esac
tr -d '\r' < "$log" | grep -q '^aavm: RESULT PASS$' || { echo "apparmor-vm: FAILED (see $log)" >&2; exit 1; }
echo "apparmor-vm: passed"
