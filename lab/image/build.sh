#!/usr/bin/env bash
# Build the twin image: a debootstrapped Debian 12 (bookworm) userland with systemd as PID 1,
# imported into podman as localhost/gpufleet-twin:<tag>. No registry is reachable, so the image
# is built from Debian's mirror, once: the tag is a hash of this script and the files it copies,
# and an existing image with that tag is reused (`podman image exists`).
#
# usage: build.sh IMAGE_REF          (lab/lab.py computes the ref and calls this when it is missing)
set -euo pipefail
ref=${1:?usage: build.sh IMAGE_REF}
here=$(cd "$(dirname "$0")" && pwd)
mirror=${GPUFLEET_LAB_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
# What a provisioned GPU node needs for Ansible and our roles: python3 (+apt, +debian, +yaml for the
# renderer), systemd + dbus, openssh-server (the lab reaches twins over SSH on loopback), procps;
# lldpd (Debian's): the fabric role's collect entry point reads `lldpcli -f json show neighbors` on nodes;
# iproute2 and ifupdown: the roce role's `ip` on a RoCE twin's real rail interfaces (lab/twin/rails.py) and
# its persistent rail configuration (/etc/network/interfaces.d, brought up by networking.service at boot).
include=systemd,systemd-sysv,dbus,python3,python3-apt,python3-debian,python3-yaml,openssh-server,procps,kmod,ca-certificates,sudo,less,lldpd,iproute2,ifupdown

work=$(mktemp -d /var/tmp/gpufleet-twin-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
t0=$(date +%s)
# The debootstrapped base is cached as a tarball (keyed on suite + package list), so a change of the
# twin-side files below re-imports in seconds instead of another minute of debootstrap.
cache=${GPUFLEET_LAB_CACHE:-$here/../.state/cache}
base=$cache/base-$suite-$(echo "$suite $include" | sha256sum | cut -c1-12).tar
mkdir -p "$cache" "$rootfs"
if [ -s "$base" ]; then
  echo "image: base rootfs from cache $base"
  tar -C "$rootfs" -xpf "$base"
else
  echo "image: debootstrap $suite from $mirror (about a minute)"
  debootstrap --variant=minbase --include="$include" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    echo "image: debootstrap $suite from $mirror failed (log above)" >&2
    exit 1
  }
  tar -C "$rootfs" -cf "$base.tmp" . && mv "$base.tmp" "$base"
fi
t1=$(date +%s)

# Twin-side files: the boot service that renders the hardware view, the GRUB stand-in, sshd drop-in.
install -D -m 0755 "$here/files/update-grub" "$rootfs/usr/sbin/update-grub"
install -D -m 0755 "$here/files/update-grub" "$rootfs/usr/sbin/grub-mkconfig"
install -D -m 0755 "$here/files/modinfo" "$rootfs/usr/local/sbin/modinfo"
install -D -m 0755 "$here/files/modprobe" "$rootfs/usr/local/sbin/modprobe"
install -D -m 0755 "$here/files/uname" "$rootfs/usr/local/bin/uname"
install -D -m 0644 "$here/files/twin-boot.service" "$rootfs/etc/systemd/system/twin-boot.service"
for unit in twin-rails-mirror.service twin-leaves.service; do
  install -D -m 0644 "$here/files/$unit" "$rootfs/etc/systemd/system/$unit"
  mkdir -p "$rootfs/etc/systemd/system/multi-user.target.wants"
  ln -sf "/etc/systemd/system/$unit" "$rootfs/etc/systemd/system/multi-user.target.wants/$unit"
done
install -D -m 0644 "$here/files/sshd-twin.conf" "$rootfs/etc/ssh/sshd_config.d/twin.conf"
install -D -m 0644 "$here/files/grub-default" "$rootfs/etc/default/grub"
mkdir -p "$rootfs/etc/default/grub.d" "$rootfs/boot/grub" "$rootfs/srv/gpufleet-repo" "$rootfs/opt/gpufleet-lab" \
  "$rootfs/etc/gpufleet-twin" "$rootfs/run/twin-bmc" "$rootfs/root/.ssh"
chmod 700 "$rootfs/root/.ssh"
mkdir -p "$rootfs/etc/systemd/system/sysinit.target.wants"
ln -sf /etc/systemd/system/twin-boot.service "$rootfs/etc/systemd/system/sysinit.target.wants/twin-boot.service"

# Air-gapped like a datacenter node: the only apt source is the lab's local repository
# (bind-mounted read-only at /srv/gpufleet-repo by lab up).
rm -f "$rootfs/etc/apt/sources.list"
echo "deb [trusted=yes] file:/srv/gpufleet-repo ./" >"$rootfs/etc/apt/sources.list.d/gpufleet-lab.list"
# Units that make no sense in a container and only slow the boot or fail.
for unit in systemd-networkd-wait-online.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
            e2scrub_all.timer fstrim.timer getty@tty1.service console-getty.service; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
echo twin >"$rootfs/etc/hostname"
: >"$rootfs/etc/machine-id"
ssh-keygen -A -f "$rootfs" >/dev/null 2>&1 || chroot "$rootfs" ssh-keygen -A >/dev/null
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*_Packages "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*

echo "image: importing as $ref"
tar -C "$rootfs" -c . | podman import -q --change 'CMD ["/lib/systemd/systemd"]' --change 'STOPSIGNAL=SIGRTMIN+3' - "$ref" >/dev/null
t2=$(date +%s)
echo "image: built $ref in $((t2 - t0)) s (base $((t1 - t0)) s, rest $((t2 - t1)) s), $(du -sh "$rootfs" | cut -f1)"
