#!/bin/sh
# PID 1 of the lab's guest initramfs (busybox, never shipped): mount proc and sysfs, print the
# guest's own view of its topology to the serial console as one ttar archive (lab/hw/ttar.py:
# path, mode, content, symlink targets) between two marker lines, then power off.
# The archive unpacks into a tree that plugins/module_utils/_node/facts.collect(root) reads.
# Under TCG every fork costs milliseconds: files are read with shell builtins, modes with one stat.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs dev /dev
exec >/dev/ttyS0 2>&1 </dev/null
mount -t proc proc /proc
mount -t sysfs sysfs /sys

entry() {  # entry PATH MODE: one Path entry with the file's lines (sysfs text files)
  n=0; body=""; line=""; tail=""
  while IFS= read -r line; do n=$((n + 1)); body="$body$line
"; done <"$1"
  if [ -n "$line" ]; then n=$((n + 1)); body="$body$line
"; tail="NoNewline: true
"; fi
  if [ "$n" = 0 ]; then  # binary attributes (cpulist, siblings) give nothing to byte-wise reads
    body=$(cat "$1")
    [ -n "$body" ] && n=1 && body="$body
"
  fi
  printf 'Path: %s\n%sLines: %d\n%sMode: %s\n# ttar - - -\n' "${1#/}" "$tail" "$n" "$body" "$2"
}

files=""
for f in /proc/cmdline /proc/cpuinfo /proc/meminfo /proc/sys/kernel/osrelease \
         /proc/sys/kernel/numa_balancing /proc/self/mounts \
         /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag \
         /sys/kernel/mm/hugepages/hugepages-*/nr_hugepages \
         /sys/devices/system/node/online /sys/devices/system/node/possible \
         /sys/devices/system/cpu/online /sys/devices/system/cpu/smt/active /sys/devices/system/cpu/smt/control \
         /sys/devices/system/node/node*/cpulist /sys/devices/system/node/node*/meminfo \
         /sys/devices/system/node/node*/distance \
         /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages \
         /sys/devices/system/node/node*/hugepages/hugepages-*/free_hugepages \
         /sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list \
         /sys/devices/system/cpu/cpu[0-9]*/topology/core_siblings_list \
         /sys/devices/system/cpu/cpu[0-9]*/topology/core_id \
         /sys/devices/system/cpu/cpu[0-9]*/topology/die_id \
         /sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id; do
  [ -r "$f" ] && files="$files $f"
done
links=""
for l in /sys/bus/pci/devices/*; do
  [ -e "$l" ] || continue
  target=$(readlink "$l")
  links="$links $l=$target"
  real="/sys/${target#../../../}"
  for f in vendor device class numa_node local_cpulist; do
    [ -r "$real/$f" ] && files="$files $real/$f"
  done
done

echo "GPUFLEET-GUEST-DUMP BEGIN"
echo "# gpufleet ttar v1"
set -- $(stat -c %a $files)
for f in $files; do
  entry "$f" "$1"
  shift
done
for pair in $links; do
  path=${pair%%=*}
  printf 'Path: %s\nSymlinkTo: %s\n# ttar - - -\n' "${path#/}" "${pair#*=}"
done
echo "GPUFLEET-GUEST-DUMP END"
poweroff -f
