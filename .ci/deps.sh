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
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing system packages: ${missing[*]} (run as root or install them)" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
