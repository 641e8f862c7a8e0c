#!/usr/bin/env bash
# System packages the lab and the real-component tests need. Installs only what is missing
# (root on a fresh Debian 12 machine); prints what it does.
set -euo pipefail
pkgs=(podman runc slirp4netns debootstrap equivs bubblewrap dpkg-dev slurm-wlm git make openssh-client
  # guest plan tests (tests/integration/guest): a QEMU guest on a busybox initramfs, libvirt's schemas
  # (virt-xml-validate needs xmllint) and a private libvirtd
  qemu-system-x86 busybox-static cpio libvirt-daemon-system libvirt-clients libxml2-utils
  # RoCE fabric test (tests/integration/fabric/test_lldpd.py): real lldpd in network namespaces
  lldpd)
# Daemons these packages enable (and start, on a systemd machine) that neither the lab nor the tests
# need running: the tests start private ones (libvirtd on its own socket, lldpd in network
# namespaces, slurmctld on a loopback port with auth/none) and stop them. lldpd on the host would
# send LLDP frames on the machine's own network. They are installed without being started and left
# disabled (each run of this script disables them again).
daemons=(lldpd.service libvirtd.service libvirtd.socket libvirtd-ro.socket libvirtd-admin.socket
  virtlogd.service virtlogd.socket virtlogd-admin.socket virtlockd.service virtlockd.socket virtlockd-admin.socket
  slurmctld.service slurmd.service munge.service)
quiet_daemons() {
  command -v systemctl >/dev/null || return 0
  local unit
  for unit in "${daemons[@]}"; do
    if [ "$(systemctl is-enabled "$unit" 2>/dev/null)" = enabled ]; then
      echo "deps: disabling $unit (installed as a dependency of the tests; they start their own)"
      systemctl disable --now "$unit" >/dev/null 2>&1 || systemctl disable "$unit" >/dev/null 2>&1 || true
    fi
  done
}
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  [ "$(id -u)" != 0 ] || quiet_daemons
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing system packages: ${missing[*]} (run as root or install them)" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# no service starts during the install (invoke-rc.d asks policy-rc.d: 101 = action forbidden)
policy=/usr/sbin/policy-rc.d
own_policy=false
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=true
fi
trap '[ "$own_policy" = false ] || rm -f "$policy"' EXIT
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
quiet_daemons
