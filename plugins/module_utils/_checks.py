# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation gate: every check is a pure function over facts, a profile and collected inputs.

``evaluate()`` runs all checks in one process and returns the report
``{status, node, profile, checks: [{id, status, observed, expected, reason, prevents, remedy}]}``.

Statuses: ``pass``; ``fail`` (the node is not what the profile says); ``skip`` (the profile does not
ask for it, or there is no data: "no data ..."; never a pass); ``error`` (the input exists but
could not be read or parsed: the reason names the path). A check listed in the profile's
``require`` turns a skip into a fail. The report fails when any check fails or errors.

Check ids are a stable interface: dashboards and alerts key on them. docs/checks.md has one line
per id; keep it in step with CHECKS.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re
import shlex

from ansible_collections.gpufleet.provision.plugins.module_utils import _pcie, _profile


class Skip(Exception):
    """The check cannot say pass or fail: not asked for by the profile, or no data."""


class CheckError(Exception):
    """The input is there but unreadable or invalid; the message names the path."""


class Check:
    def __init__(self, check_id, prevents, remedy, func):
        self.id = check_id
        self.prevents = prevents
        self.remedy = remedy
        self.func = func


CHECKS = []


def check(check_id, prevents, remedy):
    def register(func):
        CHECKS.append(Check(check_id, prevents, remedy, func))
        return func
    return register


class Inputs:
    """Everything the checks read: facts (docs/facts.md), the normalised profile, and what the
    role collected with standard modules (package_facts, service_facts, command outputs)."""

    def __init__(self, facts, profile, packages=None, services=None, outputs=None, output_errors=None, grub=None):
        self.facts = facts or {}
        self.profile = profile
        self.packages = packages
        self.services = services
        self.outputs = outputs or {}
        self.output_errors = output_errors or {}
        self.grub = grub
        self.problems = self.facts.get("problems") or []

    def want(self, *keys):
        """The profile value at keys, or Skip("not in profile (a.b)")."""
        value = _profile.section(self.profile, *keys)
        if value is None:
            raise Skip("not in profile (%s)" % ".".join(keys))
        return value

    def need(self, value, patterns, what=None):
        """``value`` unless it is None: then error for an unreadable/invalid input under one of the
        path ``patterns`` (fnmatch), else skip "no data" naming what is missing."""
        if value is not None:
            return value
        raise self.no_data(patterns, what)

    def no_data(self, patterns, what=None):
        found = [p for p in self.problems if any(fnmatch.fnmatchcase(p.get("path", ""), pat) for pat in patterns)]
        bad = [p for p in found if p.get("kind") in ("unreadable", "invalid")]
        if bad:
            return CheckError("; ".join("%s: %s (%s)" % (p["path"], p.get("detail"), p.get("kind")) for p in bad))
        if found:
            return Skip("no data: " + "; ".join("%s %s" % (p["path"], p.get("kind")) for p in found))
        return Skip("no data" + (": " + what if what else ""))

    def output(self, name, command):
        """Captured output ``name`` (str) or Skip("no data: <command> not collected (...)")."""
        text = self.outputs.get(name)
        if text is None:
            cause = self.output_errors.get(name)
            raise Skip("no data: %s output not collected%s" % (command, " (%s)" % cause if cause else ""))
        if not isinstance(text, str):
            raise CheckError("outputs.%s: expected the command's text output, got %s" % (name, type(text).__name__))
        return text


def _outcome(failures, unknown, observed, expected, ok="ok"):
    if failures:
        return "fail", observed, expected, "; ".join(failures)
    if unknown:
        raise Skip("no data: " + "; ".join(unknown))
    return "pass", observed, expected, ok


# ---------------------------------------------------------------- helpers (pure)

def version_key(text):
    """``28.39.1002`` -> [(0, 28), (0, 39), (0, 1002)]; letters sort after numbers (``MPK7525Q``)."""
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.findall(r"\d+|[A-Za-z]+", text or "")]


def upstream_version(version):
    """Debian ``1:550.90.07-0ubuntu1`` -> "550.90.07"; RPM versions (no revision) unchanged."""
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def _speed_gts(text):
    """``32.0 GT/s PCIe`` -> 32.0; ``Unknown`` -> None."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


def _param_text(key, value):
    return key if value is None else "%s=%s" % (key, value)


def analyse_cmdline(tokens, allow_repeated=()):
    """Kernel command line rules over ``tokens`` = [(key, value, origin)] in order.

    - ``hugepagesz=`` precedes the ``hugepages=`` it sizes; each size exactly once. A ``hugepages=``
      right after ``default_hugepagesz=`` sizes the default pool (kernel >= 5.7). Any other bare
      ``hugepages=`` makes the kernel warn "HugeTLB: hugepages= specified twice without
      interleaving hugepagesz=, ignoring" (or silently size the arch default): the planned pool is lost.
    - any other key at most once (``default_hugepagesz=`` included), except ``allow_repeated``.
    Returns (problems: [str], pools: {size_kb: count}).
    """
    problems = []
    pools = {}
    size_origin = {}
    pending = None
    last_count = None
    seen = {}
    for key, value, origin in tokens:
        where = "%s (%s)" % (_param_text(key, value), origin)
        if key in ("hugepagesz", "default_hugepagesz"):
            if key == "default_hugepagesz":
                seen.setdefault(key, []).append(where)
            try:
                size = _profile.size_kb(value or "")
            except ValueError:
                problems.append("%s: not a hugepage size" % where)
                pending = None
                continue
            if key == "hugepagesz":
                if pending is not None and pending[2] == "hugepagesz":
                    problems.append("%s follows %s with no hugepages= between them" % (where, pending[1]))
                if size in size_origin:
                    problems.append("%s: size %s kB given twice (first %s)" % (where, size, size_origin[size]))
                else:
                    size_origin[size] = where
            pending = (size, where, key)
        elif key == "hugepages":
            if pending is None:
                if last_count is not None:
                    problems.append("%s follows %s with no hugepagesz= between them: the kernel ignores it "
                                    "(\"HugeTLB: hugepages= specified twice without interleaving hugepagesz=\")" % (where, last_count))
                else:
                    problems.append("%s has no hugepagesz= before it (it sizes whatever the default page size is)" % where)
                last_count = where
                continue
            last_count = where
            size = pending[0]
            pending = None
            try:
                count = int(value or "")
            except ValueError:
                problems.append("%s: not a page count" % where)
                continue
            if size in pools:
                problems.append("%s: pool %s kB already set" % (where, size))
            else:
                pools[size] = count
        else:
            seen.setdefault(key, []).append(where)
    if pending is not None and pending[2] == "hugepagesz":
        problems.append("%s is not followed by its hugepages=" % pending[1])
    for key, wheres in seen.items():
        if len(wheres) > 1 and key not in allow_repeated:
            problems.append("%s given %d times: %s" % (key, len(wheres), ", ".join(wheres)))
    return problems, pools


def required_params(tokens, required, forbidden):
    """Missing required ``key`` / ``key=value`` (the last occurrence counts, as for most kernel
    parameters) and present forbidden ones. Returns [str]."""
    last = {}
    present = set()
    for key, value, _origin in tokens:
        last[key] = value
        present.add(_param_text(key, value))
    out = []
    for param in required or []:
        key, sep, value = param.partition("=")
        if key not in last:
            out.append("%s missing" % param)
        elif sep and last[key] != value:
            out.append("%s expected, last %s" % (param, _param_text(key, last[key])))
    for param in forbidden or []:
        key, sep, _value = param.partition("=")
        if (sep and param in present) or (not sep and key in last):
            out.append("%s forbidden but present" % param)
    return out


_ASSIGN = re.compile(r"^\s*(?:export\s+)?(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=(.*)$")
_VAR = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")


def _shell_value(rhs):
    """The value of a sh assignment's right-hand side: ``"a $X" # c`` -> ``a $X``."""
    rhs = rhs.strip()
    if rhs[:1] in ("'", '"'):
        end = rhs.find(rhs[0], 1)
        if end < 0:
            raise ValueError("unterminated quote")
        return rhs[1:end]
    return rhs.split("#", 1)[0].split()[0] if rhs.split("#", 1)[0].split() else ""


def grub_tokens(sources):
    """GRUB sources in sourcing order [(rel path, text)] -> [(key, value, origin)] of the cmdline
    the next ``update-grub`` writes (GRUB_CMDLINE_LINUX then GRUB_CMDLINE_LINUX_DEFAULT).

    Cloud images append in /etc/default/grub.d/50-cloudimg-settings.cfg::

        GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT hugepages=16"

    so ``$VAR`` words keep the origin of the file that set them. Raises ValueError naming the file.
    """
    env = {"GRUB_CMDLINE_LINUX": [], "GRUB_CMDLINE_LINUX_DEFAULT": []}
    for rel, text in sources:
        for number, line in enumerate(text.splitlines(), 1):
            match = _ASSIGN.match(line)
            if not match:
                continue
            try:
                value = _shell_value(match.group(2))
            except ValueError as exc:
                raise ValueError("%s line %d: %s: %r" % (rel, number, exc, line))
            try:
                words = shlex.split(value)
            except ValueError:
                words = value.split()
            out = []
            for word in words:
                ref = _VAR.match(word)
                if ref:
                    out.extend(env.get(ref.group(1) or ref.group(2), []))
                else:
                    out.append((word, "%s:%d" % (rel, number)))
            env[match.group(1)] = out
    tokens = []
    for word, origin in env["GRUB_CMDLINE_LINUX"] + env["GRUB_CMDLINE_LINUX_DEFAULT"]:
        key, sep, value = word.partition("=")
        tokens.append((key, value if sep else None, origin))
    return tokens


def parse_fabric_state(text):
    """``nvidia-smi -q`` -> {gpu bus id: {"State": ..., "Status": ...}} from each GPU's Fabric block::

        GPU 00000000:18:00.0
            Fabric
                State                             : Completed
                Status                            : Success
    """
    out = {}
    gpu = None
    in_fabric = None
    for line in text.splitlines():
        match = re.match(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line)
        if match:
            gpu = match.group(1).lower()
            in_fabric = None
            continue
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped == "Fabric" and gpu is not None:
            in_fabric = indent
            out[gpu] = {}
            continue
        if in_fabric is not None:
            if not stripped:
                continue
            if indent <= in_fabric:
                in_fabric = None
                continue
            key, sep, value = stripped.partition(":")
            if sep:
                out[gpu][key.strip()] = value.strip()
    return out


_GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def parse_gpu_link(text):
    """``nvidia-smi -q`` -> {gpu bus id: {"gen_max", "gen_current", "width_max", "width_current"}}.

    ``Max`` under PCIe Generation is what the link can train to (the lower of device and host),
    which sysfs's max_link_speed (the device alone) does not say::

        GPU 00000000:18:00.0
            PCI
                GPU Link Info
                    PCIe Generation
                        Max                       : 5
                        Current                   : 1
                        Device Max                : 5
                        Host Max                  : 5
                    Link Width
                        Max                       : 16x
                        Current                   : 16x
    """
    out = {}
    gpu, block = None, None
    for line in text.splitlines():
        match = re.match(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line)
        if match:
            gpu, block = match.group(1).lower(), None
            continue
        stripped = line.strip()
        if stripped in ("PCIe Generation", "Link Width"):
            block = stripped
            continue
        key, sep, value = stripped.partition(":")
        key, value = key.strip(), value.strip()
        if gpu is None or block is None or not sep:
            if not sep:
                block = None
            continue
        if key in ("Max", "Current"):
            number = re.match(r"^(\d+)x?$", value)
            if number:
                name = ("gen_" if block == "PCIe Generation" else "width_") + key.lower()
                out.setdefault(gpu, {})[name] = int(number.group(1))
    return out


def parse_mlxconfig(text, name):
    """``mlxconfig -d <pci> q ATS_ENABLED`` -> the configured value as bool::

        Configurations:                              Next Boot
                ATS_ENABLED                         True(1)
    """
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == name and len(fields) > 1:
            match = re.search(r"\((\d+)\)$", fields[-1])
            if match:
                return match.group(1) != "0"
            if fields[-1].lower() in ("true", "false"):
                return fields[-1].lower() == "true"
            raise ValueError("%s value %r" % (name, fields[-1]))
    raise ValueError("no %s line" % name)


def parse_ofed_info(text):
    """``ofed_info -s``: ``MLNX_OFED_LINUX-23.10-1.1.9.0:`` (DOCA: ``OFED-internal-24.10-1.1.4:``) -> "23.10-1.1.9.0"."""
    match = re.search(r"(\d+\.\d+-[0-9.]+[0-9])", text.strip().splitlines()[0] if text.strip() else "")
    if not match:
        raise ValueError("no OFED version in %r" % text.strip()[:60])
    return match.group(1)


def parse_vermagic(text):
    """``modinfo -F vermagic mlx5_core`` -> release: ``6.8.0-45-generic SMP preempt mod_unload`` ->
    "6.8.0-45-generic"; a full ``modinfo`` output is read from its ``vermagic:`` line."""
    for line in text.splitlines():
        if line.startswith("vermagic:"):
            return line.split(":", 1)[1].split()[0]
    words = text.split()
    if not words or ":" in words[0]:
        raise ValueError("no vermagic in %r" % text.strip()[:60])
    return words[0]


def parse_nccl_debug(text):
    """NCCL_DEBUG=INFO lines -> {"transports": set, "hcas": [..]}::

        node001:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB ; OOB eth0:10.0.0.1<0>
        node001:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
        node001:1:1 [0] NCCL INFO Using network IB
    """
    transports = set()
    hcas = []
    for line in text.splitlines():
        match = re.search(r"NCCL INFO NET/(\w+)\s*:\s*Using\s+(.*)$", line)
        if match:
            transports.add(match.group(1))
            if match.group(1) == "IB":
                for hca in re.findall(r"\[\d+\]([\w.-]+):\d+/IB", match.group(2)):
                    if hca not in hcas:
                        hcas.append(hca)
            continue
        match = re.search(r"NCCL INFO Using network (\w+)", line)
        if match:
            transports.add(match.group(1))
    return {"transports": transports, "hcas": hcas}


def parse_h2d(text):
    """Host-to-device bandwidth per GPU -> {gpu: [GB/s per run]}.

    nvbandwidth ``host_to_device_memcpy_ce`` prints a matrix (one row, a column per GPU)::

        memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
                   0         1
         0     48.91     48.87

    one run per invocation, so several invocations give several runs. Simpler probes print one line
    per GPU and run: ``GPU 0: 48.9 GB/s``.
    """
    runs = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        match = re.match(r"^\s*GPU\s+(\S+?)\s*:\s*(\d+(?:\.\d+)?)\s*GB/s", line)
        if match:
            runs.setdefault(match.group(1), []).append(float(match.group(2)))
        elif "CPU(row) -> GPU(column)" in line and i + 2 < len(lines):
            columns = lines[i + 1].split()
            values = lines[i + 2].split()[1:]
            if len(columns) != len(values):
                raise ValueError("nvbandwidth matrix: %d columns, %d values" % (len(columns), len(values)))
            for col, value in zip(columns, values):
                runs.setdefault(col, []).append(float(value))
            i += 2
        i += 1
    if not runs:
        raise ValueError("no 'GPU <n>: <x> GB/s' line or nvbandwidth CPU(row) -> GPU(column) matrix")
    return runs


def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def _rail_nics(facts):
    return [n for n in facts.get("nics") or [] if n.get("role") == "rail"]


# ---------------------------------------------------------------- checks (registration order = report order)

@check("os.release", "an OS release the fleet was not qualified on (driver, OFED and kernel packages differ)",
       "reinstall the node from the fleet image for its profile")
def _os_release(ctx):
    want = ctx.want("os")
    osr = ctx.need(ctx.facts.get("os"), ["etc/os-release"])
    expected = dict((k, v) for k, v in (("ID", want.get("id")), ("VERSION_ID", want.get("version_id"))) if v is not None)
    observed = dict((k, osr.get(k)) for k in expected)
    bad = ["%s=%s, expected %s" % (k, observed[k], v) for k, v in expected.items() if observed[k] != v]
    return _outcome(bad, [], observed, expected)


@check("kernel.version", "modules (nvidia, OFED) built for another kernel; a fleet running mixed kernels",
       "install the profile's linux-image (and headers), apt-mark hold it, make it the GRUB default, reboot")
def _kernel_version(ctx):
    want = ctx.want("kernel", "release")
    release = ctx.need((ctx.facts.get("kernel") or {}).get("release"), ["proc/sys/kernel/osrelease"])
    return _outcome([] if release == want else ["running %s" % release], [], release, want)


@check("kernel.cmdline", "hugepages= twice (the kernel ignores the second: the pool is not what was planned), "
       "missing iommu/THP/NUMA-balancing parameters",
       "set the parameters once in GRUB_CMDLINE_LINUX (/etc/default/grub), update-grub (RHEL: grubby --update-kernel=ALL), reboot")
def _kernel_cmdline(ctx):
    want = ctx.want("kernel", "cmdline")
    params = ctx.need(((ctx.facts.get("kernel") or {}).get("cmdline") or {}).get("params"), ["proc/cmdline"])
    tokens = [(p["key"], p.get("value"), "proc/cmdline") for p in params]
    problems, pools = analyse_cmdline(tokens, want.get("allow_repeated") or [])
    problems += required_params(tokens, want.get("required"), want.get("forbidden"))
    observed = {"raw": ctx.facts["kernel"]["cmdline"].get("raw"), "hugepage_pools_kb": pools}
    return _outcome(problems, [], observed, want)


@check("kernel.grub_sources", "a GRUB source (/etc/default/grub or grub.d/*.cfg) that will give a duplicate or "
       "missing parameter at the next reboot",
       "keep the parameters in one GRUB source and remove them from the others (cloud images: /etc/default/grub.d/*.cfg), update-grub")
def _grub_sources(ctx):
    want = ctx.want("kernel", "cmdline")
    if _profile.section(ctx.profile, "kernel", "grub_sources") is False:
        raise Skip("not in profile (kernel.grub_sources: false)")
    grub = ctx.grub
    if grub is None:
        raise Skip("no data: GRUB sources not read")
    bad = [p for p in grub.get("problems") or [] if p.get("kind") in ("unreadable", "invalid")]
    if bad:
        raise CheckError("; ".join("%s: %s (%s)" % (p["path"], p.get("detail"), p.get("kind")) for p in bad))
    if not grub.get("sources"):
        raise Skip("no data: etc/default/grub missing")
    try:
        tokens = grub_tokens(grub["sources"])
    except ValueError as exc:
        raise CheckError(str(exc))
    problems, pools = analyse_cmdline(tokens, want.get("allow_repeated") or [])
    problems += required_params(tokens, want.get("required"), want.get("forbidden"))
    observed = {
        "files": [rel for rel, _text in grub["sources"]],
        "cmdline": " ".join(_param_text(k, v) for k, v, _o in tokens),
        "hugepage_pools_kb": pools,
    }
    return _outcome(problems, [], observed, want)


@check("memory.hugepages", "a hugepage pool smaller or larger than planned (VMs or jobs fail to start, or memory is stranded)",
       "hugepagesz=<size> hugepages=<count> per pool on the kernel command line (profile memory.hugepages), update-grub, reboot")
def _hugepages(ctx):
    total = _profile.section(ctx.profile, "memory", "hugepages")
    per_node = _profile.section(ctx.profile, "memory", "hugepages_per_node")
    if total is None and per_node is None:
        raise Skip("not in profile (memory.hugepages)")
    failures, observed, expected = [], {}, {}
    if total is not None:
        pools = ctx.need((ctx.facts.get("kernel") or {}).get("hugepages"), ["sys/kernel/mm/hugepages*"])
        observed["total"] = dict((s, pools.get(s)) for s in total)
        expected["total"] = total
        for size, count in sorted(total.items()):
            if pools.get(size) is None:
                raise ctx.no_data(["sys/kernel/mm/hugepages/hugepages-%skB*" % size], "no %s kB pool in sysfs" % size)
            if pools[size] != count:
                failures.append("%s kB pages: %s, expected %s" % (size, pools[size], count))
    if per_node is not None:
        nodes = ctx.need((ctx.facts.get("numa") or {}).get("nodes"), ["sys/devices/system/node*"])
        expected["per_node"] = per_node
        observed["per_node"] = {}
        for node in nodes:
            pools = node.get("hugepages")
            if pools is None:
                raise ctx.no_data(["sys/devices/system/node/node%s/hugepages*" % node.get("id")])
            observed["per_node"][str(node.get("id"))] = dict((s, pools.get(s)) for s in per_node)
            for size, count in sorted(per_node.items()):
                if pools.get(size) != count:
                    failures.append("node%s %s kB pages: %s, expected %s" % (node.get("id"), size, pools.get(size), count))
    return _outcome(failures, [], observed, expected)


@check("memory.thp", "transparent hugepages on: latency jitter and memory bloat",
       "transparent_hugepage=never on the kernel command line (now: echo never > /sys/kernel/mm/transparent_hugepage/enabled)")
def _thp(ctx):
    want = ctx.want("memory", "thp")
    mode = ctx.need(((ctx.facts.get("kernel") or {}).get("thp") or {}).get("enabled"),
                    ["sys/kernel/mm/transparent_hugepage/enabled"])
    return _outcome([] if mode == want else ["enabled is [%s]" % mode], [], mode, want)


@check("memory.numa_balancing", "automatic NUMA balancing migrating pages under a pinned workload",
       "numa_balancing=disable on the kernel command line (now: sysctl kernel.numa_balancing=0)")
def _numa_balancing(ctx):
    want = ctx.want("memory", "numa_balancing")
    value = ctx.need((ctx.facts.get("kernel") or {}).get("numa_balancing"), ["proc/sys/kernel/numa_balancing"])
    ok = (value != 0) if want else (value == 0)
    return _outcome([] if ok else ["kernel.numa_balancing = %s" % value], [], value, 1 if want else 0)


@check("cpu.smt", "hyper-threading off: half the CPUs, pinning plans wrong",
       "BIOS: logical processors / hyper-threading on (role gpufleet.provision.bios), reboot")
def _smt(ctx):
    want = ctx.want("cpu", "smt")
    cpu = ctx.facts.get("cpu") or {}
    active = cpu.get("smt_active")
    if active is None and cpu.get("threads_per_core") is not None:
        active = cpu["threads_per_core"] > 1
    active = ctx.need(active, ["sys/devices/system/cpu/smt/*", "sys/devices/system/cpu/cpu*/topology/*"])
    return _outcome([] if active == want else ["SMT active: %s" % active], [], active, want)


@check("cpu.governor", "a CPU running downclocked (governor not performance) mid-job",
       "cpufreq governor performance on every CPU (cpupower frequency-set -g performance, persisted); BIOS: OS-controlled P-states")
def _governor(ctx):
    want = ctx.want("cpu", "governor")
    gov = ctx.need((ctx.facts.get("kernel") or {}).get("governor"), ["sys/devices/system/cpu/cpu*/cpufreq/*"])
    counts = gov.get("counts") or {}
    without = gov.get("without_cpufreq") or []
    if not counts:
        raise ctx.no_data(["sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"], "no CPU has a cpufreq governor")
    failures = []
    other = dict((g, n) for g, n in counts.items() if g != want)
    if other:
        failures.append("CPUs with another governor: %s" % ", ".join("%s x%d" % kv for kv in sorted(other.items())))
    if without:
        failures.append("%d online CPUs without cpufreq (first: %s)" % (len(without), without[:8]))
    return _outcome(failures, [], {"counts": counts, "without_cpufreq": len(without)}, want)


@check("cpu.vtx", "VT-x/AMD-V off in BIOS: no KVM, no VFIO passthrough",
       "BIOS: processor virtualization (VMX/SVM) on (role gpufleet.provision.bios), reboot")
def _vtx(ctx):
    want = ctx.want("cpu", "vtx")
    flags = ctx.need((ctx.facts.get("cpu") or {}).get("flags"), ["proc/cpuinfo"])
    has = bool(flags.get("vmx") or flags.get("svm"))
    observed = {"vmx": flags.get("vmx"), "svm": flags.get("svm"), "kvm": (ctx.facts.get("kernel") or {}).get("kvm")}
    return _outcome([] if has == want else ["vmx/svm flag %s" % ("present" if has else "absent")], [], observed, want)


@check("iommu.enabled", "IOMMU off: VFIO passthrough impossible, or on where the profile wants it off",
       "BIOS: VT-d/AMD-Vi on (role gpufleet.provision.bios); intel_iommu=on iommu=pt on the kernel command line; reboot")
def _iommu(ctx):
    want = ctx.want("iommu", "enabled")
    iommu = ctx.need((ctx.facts.get("kernel") or {}).get("iommu"), ["sys/class/iommu*", "sys/kernel/iommu_groups*"])
    active = bool(iommu.get("active"))
    observed = {"active": active, "units": len(iommu.get("units") or []), "groups": iommu.get("groups")}
    return _outcome([] if active == want else ["IOMMU active: %s" % active], [], observed, want)


@check("numa.layout", "sub-NUMA clustering not applied (BIOS update reset it): memory on the wrong node, uneven H2D bandwidth",
       "BIOS: sub-NUMA clustering per profile (e.g. SNC4) and hyper-threading (role gpufleet.provision.bios), reboot")
def _numa_layout(ctx):
    want = ctx.want("numa")
    if want.get("nodes") is None and want.get("cpus_per_node") is None:
        raise Skip("not in profile (numa.nodes, numa.cpus_per_node)")
    numa = ctx.facts.get("numa") or {}
    nodes = ctx.need(numa.get("nodes"), ["sys/devices/system/node*"])
    if not nodes:
        raise ctx.no_data(["sys/devices/system/node*"], "no NUMA node in sysfs")
    observed = {"nodes": len(nodes), "cpus_per_node": dict((str(n.get("id")), len(n.get("cpus") or [])) for n in nodes)}
    failures = []
    if want.get("nodes") is not None and len(nodes) != want["nodes"]:
        failures.append("%d NUMA nodes, expected %d" % (len(nodes), want["nodes"]))
    if want.get("cpus_per_node") is not None:
        odd = ["node%s %d" % (k, v) for k, v in observed["cpus_per_node"].items() if v != want["cpus_per_node"]]
        if odd:
            failures.append("CPUs per node: %s, expected %d each" % (", ".join(odd), want["cpus_per_node"]))
    return _outcome(failures, [], observed, want)


@check("gpu.count", "a GPU fallen off the bus or the wrong GPU model in the node",
       "reseat or replace the GPU / baseboard (RMA); check the BMC event log")
def _gpu_count(ctx):
    want = ctx.want("gpu")
    if want.get("count") is None and want.get("model") is None and want.get("device_id") is None:
        raise Skip("not in profile (gpu.count, gpu.model, gpu.device_id)")
    gpus = ctx.need(ctx.facts.get("gpus"), ["sys/bus/pci/devices*"])
    failures = []
    if want.get("count") is not None and len(gpus) != want["count"]:
        failures.append("%d GPUs, expected %d" % (len(gpus), want["count"]))
    for gpu in gpus:
        if want.get("device_id") and gpu.get("device_id") != want["device_id"].lower():
            failures.append("%s device %s" % (gpu.get("pci"), gpu.get("device_id")))
        if want.get("model") and want["model"].lower() not in (gpu.get("model") or "").lower():
            failures.append("%s model %r" % (gpu.get("pci"), gpu.get("model")))
    observed = {"count": len(gpus), "models": sorted(set(str(g.get("model")) for g in gpus))}
    return _outcome(failures, [], observed, want)


@check("gpu.pcie_link", "a GPU trained at a lower PCIe width/generation (bad riser or retimer): H2D bandwidth halved, no error",
       "reseat the GPU / check the retimer and riser cables; BIOS PCIe link speed settings")
def _gpu_link(ctx):
    want = ctx.want("gpu")
    min_speed, min_width = want.get("min_link_speed_gts"), want.get("min_link_width")
    if min_speed is None and min_width is None:
        raise Skip("not in profile (gpu.min_link_speed_gts, gpu.min_link_width)")
    gpus = ctx.need(ctx.facts.get("gpus"), ["sys/bus/pci/devices*"])
    if not gpus:
        raise Skip("no data: no GPU found")
    # GPUs drop the link generation at idle (2.5 GT/s while idle is normal): the speed compared by
    # default is what the link trained to at most (max_link_speed); the width does not idle down.
    # nvidia-smi, when collected, knows what the link can train to (device AND host slot): a Gen5
    # GPU in a Gen4 slot shows Max 4 there, while sysfs max_link_speed still says 32 GT/s.
    smi = parse_gpu_link(str(ctx.outputs["nvidia_smi_q"])) if ctx.outputs.get("nvidia_smi_q") is not None else {}
    current = bool(want.get("check_current_speed"))
    speed_key = "speed" if current else "max_speed"
    failures, observed = [], {}
    for gpu in gpus:
        link = gpu.get("link") or {}
        base = "sys/bus/pci/devices/%s/" % gpu.get("pci")
        speed = _speed_gts(link.get(speed_key))
        width = link.get("width")
        nv = smi.get("0000" + (gpu.get("pci") or "")) or smi.get(gpu.get("pci") or "") or {}
        gen = nv.get("gen_current" if current else "gen_max")
        # Two views of one link: the worse one counts.
        if gen in _GEN_GTS and (speed is None or _GEN_GTS[gen] < speed):
            speed, speed_key = _GEN_GTS[gen], "nvidia-smi PCIe generation %s (Gen%d)" % ("current" if current else "max", gen)
        if nv.get("width_current") is not None and (width is None or nv["width_current"] < width):
            width = nv["width_current"]
        observed[gpu.get("pci")] = "%s x%s" % (link.get("speed"), width) + (" (nvidia-smi Gen%s max, x%s)" % (
            nv.get("gen_max"), nv.get("width_current")) if nv else "")
        if min_speed is not None:
            if speed is None:
                raise ctx.no_data([base + "*link_speed"], "%s link speed" % gpu.get("pci"))
            if speed < min_speed:
                failures.append("%s %s %.1f GT/s" % (gpu.get("pci"), speed_key, speed))
        if min_width is not None:
            if width is None:
                raise ctx.no_data([base + "*link_width"], "%s link width" % gpu.get("pci"))
            if width < min_width:
                failures.append("%s width x%d" % (gpu.get("pci"), width))
    return _outcome(failures, [], observed, {"min_speed_gts": min_speed, "min_width": min_width, "speed": speed_key})


@check("nvidia.driver", "a node on another NVIDIA driver than the fleet: benchmarks diverge, FM mismatch",
       "install the profile's driver version (pin the upstream version, any revision), apt-mark hold it, reboot or reload the modules")
def _driver(ctx):
    want = ctx.want("nvidia", "driver_version")
    nv = ctx.facts.get("nvidia") or {}
    if nv.get("loaded") is False:
        return "fail", None, want, "nvidia kernel module not loaded"
    version = ctx.need(nv.get("driver_version"), ["sys/module/nvidia/version"])
    failures = [] if version == want else ["loaded %s" % version]
    proc = nv.get("proc_version")
    if proc is not None and proc != version:
        failures.append("proc/driver/nvidia/version says %s" % proc)
    return _outcome(failures, [], {"module": version, "proc": proc}, want)


def _fm_packages(packages):
    """Installed fabric manager packages: Ubuntu/CUDA apt ``nvidia-fabricmanager-550``, from R580
    the unversioned ``nvidia-fabricmanager``, CUDA's RPM ``nvidia-fabric-manager``."""
    out = []
    for name, entries in sorted((packages or {}).items()):
        if re.match(r"^nvidia-fabric-?manager(-\d+)?$", name):
            for entry in entries or []:
                out.append((name, str(entry.get("version"))))
    return out


@check("nvidia.fabricmanager", "fabric manager missing, stopped or of another version than the driver: every GPU "
       "listed, but CUDA returns 802 (system not ready) at the first multi-GPU job",
       "install the fabric manager package of exactly the driver version (apt-cache madison), apt-mark hold it and "
       "the driver, systemctl enable --now nvidia-fabricmanager")
def _fabricmanager(ctx):
    nv = ctx.facts.get("nvidia") or {}
    required = _profile.section(ctx.profile, "nvidia", "fabricmanager")
    if required is None:
        required = ctx.need(nv.get("nvswitch_present"), ["proc/driver/nvidia-nvswitch*"], "NVSwitch presence")
    if not required:
        if not ctx.facts.get("gpus"):
            raise Skip("no data: no GPU found")
        return "pass", {"nvswitches": nv.get("nvswitch_count")}, {"required": False}, "not required: no NVSwitch"
    driver = _profile.section(ctx.profile, "nvidia", "driver_version") or nv.get("driver_version")
    failures, unknown, observed = [], [], {"nvswitches": nv.get("nvswitch_count")}
    if ctx.packages is None:
        unknown.append("packages not collected")
    else:
        pkgs = _fm_packages(ctx.packages)
        observed["packages"] = ["%s %s" % p for p in pkgs]
        if not pkgs:
            failures.append("nvidia-fabricmanager not installed")
        elif driver is None:
            unknown.append("driver version unknown")
        else:
            failures += ["%s %s != driver %s" % (n, v, driver) for n, v in pkgs if upstream_version(v) != driver]
    if ctx.services is None:
        unknown.append("services not collected")
    else:
        svc = ctx.services.get("nvidia-fabricmanager.service") or ctx.services.get("nvidia-fabricmanager")
        observed["service"] = svc.get("state") if svc else None
        if svc is None:
            failures.append("nvidia-fabricmanager.service not present")
        elif svc.get("state") != "running":
            failures.append("nvidia-fabricmanager.service %s" % svc.get("state"))
    text = ctx.outputs.get("nvidia_smi_q")
    if text is None:
        unknown.append("nvidia-smi -q output not collected%s" % (
            " (%s)" % ctx.output_errors["nvidia_smi_q"] if ctx.output_errors.get("nvidia_smi_q") else ""))
    else:
        states = parse_fabric_state(str(text))
        observed["fabric"] = sorted(set(s.get("State") for s in states.values()))
        if not states:
            # Drivers before the fabric block, or a stand-in nvidia-smi: the state is unknown, not bad.
            unknown.append("nvidia-smi -q shows no Fabric block")
        bad = ["%s %s/%s" % (g, s.get("State"), s.get("Status")) for g, s in sorted(states.items()) if s.get("State") != "Completed"]
        if bad:
            failures.append("fabric state not Completed: %s" % ", ".join(bad))
    return _outcome(failures, unknown, observed, {"version": driver, "service": "running", "fabric": "Completed"})


def parse_versionlock(text):
    """``dnf versionlock list`` -> package names: ``nvidia-driver-3:550.90.07-1.el9.*`` -> nvidia-driver
    (name-[epoch:]version-release, the release possibly a glob). Other lines (metadata notes) are skipped."""
    names = set()
    for line in text.splitlines():
        line = line.strip()
        parts = line.rsplit("-", 2)
        if len(parts) == 3 and parts[0] and re.match(r"^(\d+:)?[0-9][\w.+~]*$", parts[1]) and " " not in line:
            names.add(parts[0])
    return names


@check("packages.held", "driver/fabric manager/kernel drifting apart on apt upgrade (not held)",
       "apt-mark hold the pinned packages (driver, fabric manager, kernel) so an upgrade cannot split them "
       "(RHEL family: dnf versionlock add)")
def _held(ctx):
    want = ctx.want("packages", "held")
    if ctx.outputs.get("apt_mark_showhold") is None and ctx.outputs.get("dnf_versionlock") is not None:
        held = parse_versionlock(ctx.output("dnf_versionlock", "dnf versionlock list"))
    else:
        held = set(ctx.output("apt_mark_showhold", "apt-mark showhold").split())
    installed = sorted((ctx.packages or {}).keys()) if ctx.packages is not None else None
    failures, observed = [], {"held": sorted(held)}
    for pattern in want:
        names = [n for n in installed if fnmatch.fnmatchcase(n, pattern)] if installed is not None else []
        if installed is not None and not names:
            failures.append("%s: not installed" % pattern)
        for name in names:
            if name not in held:
                failures.append("%s: installed, not held" % name)
        if installed is None and not any(fnmatch.fnmatchcase(h, pattern) for h in held):
            failures.append("%s: not held" % pattern)
    return _outcome(failures, [], observed, want)


@check("nic.rails", "a GPU without its rail NIC on the same PCIe switch: GPUDirect RDMA off, collectives slower",
       "check the NIC/GPU slot population and cabling against the platform guide; BIOS: all NICs enabled")
def _rails(ctx):
    want = ctx.want("nic")
    if want.get("rails") is None and want.get("affinity") is None:
        raise Skip("not in profile (nic.rails, nic.affinity)")
    nics = ctx.need(ctx.facts.get("nics"), ["sys/class/infiniband*"])
    pairs = ctx.facts.get("pairs") or []
    allowed = want.get("affinity") or ["PIX"]
    rails = _rail_nics(ctx.facts)
    failures = []
    if want.get("rails") is not None and len(rails) != want["rails"]:
        failures.append("%d rail NICs, expected %d" % (len(rails), want["rails"]))
    for pair in pairs:
        if pair.get("nic") is None:
            failures.append("GPU %s has no NIC" % pair.get("gpu"))
        elif pair.get("affinity") not in allowed:
            failures.append("GPU %s - %s %s" % (pair.get("gpu"), pair.get("nic"), pair.get("affinity")))
    observed = {"rails": len(rails), "nics": len(nics),
                "pairs": ["%s-%s %s" % (p.get("gpu"), p.get("nic"), p.get("affinity")) for p in pairs]}
    return _outcome(failures, [], observed, {"rails": want.get("rails"), "affinity": allowed})


@check("ib.ports", "an IB port down or at the wrong rate/link layer: collectives use fewer rails or fall back to TCP",
       "check cable/transceiver and switch port (ibstat, the leaf's port counters); link layer: mlxconfig LINK_TYPE_P1")
def _ib_ports(ctx):
    want = ctx.want("ib")
    nics = ctx.need(ctx.facts.get("nics"), ["sys/class/infiniband*"])
    scope = want.get("scope") or "rail"
    chosen = _rail_nics(ctx.facts) if scope == "rail" else [n for n in nics if n.get("role") != "vf"]
    if not chosen:
        raise Skip("no data: no %s NIC found" % ("rail" if scope == "rail" else "RDMA"))
    failures, observed = [], {}
    for nic in chosen:
        for port in nic.get("ports") or []:
            name = "%s/%s" % (nic.get("name"), port.get("port"))
            base = "sys/class/infiniband/%s/ports/%s/" % (nic.get("name"), port.get("port"))
            observed[name] = "%s %s %s" % (port.get("state"), port.get("rate"), port.get("link_layer"))
            for key, field, expected in (("state", "state", want.get("state")), ("phys_state", "phys_state", want.get("phys_state")),
                                         ("link_layer", "link_layer", want.get("link_layer"))):
                if expected is None:
                    continue
                value = ctx.need(port.get(key), [base + field])
                if value != expected:
                    failures.append("%s %s %s" % (name, key, value))
            if want.get("min_rate_gbps") is not None:
                rate = ctx.need(port.get("rate_gbps"), [base + "rate"])
                if rate < want["min_rate_gbps"]:
                    failures.append("%s rate %s" % (name, port.get("rate")))
        if not nic.get("ports"):
            failures.append("%s has no port" % nic.get("name"))
    return _outcome(failures, [], observed, want)


_ACS_VIRT = ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans")


@check("pcie.acs", "ACS redirecting GPU-NIC peer traffic through the root complex: GPUDirect RDMA bandwidth collapses, no error",
       "BIOS: PCIe ACS control per host mode (bare metal: disabled; role gpufleet.provision.bios), or "
       "setpci on the switch ports at boot; virtualization: ACS with DirectTrans+ and ATS on the NIC")
def _acs(ctx):
    mode = ctx.want("host_mode")
    gpus = dict((g.get("pci"), g) for g in ctx.facts.get("gpus") or [])
    nics = dict((n.get("name"), n) for n in ctx.facts.get("nics") or [])
    bridges = (ctx.facts.get("pcie") or {}).get("bridges")
    bridges = ctx.need(bridges, ["sys/bus/pci/devices/*/config"])
    pairs = [p for p in ctx.facts.get("pairs") or [] if p.get("nic") and p.get("gpu") in gpus and p.get("nic") in nics]
    if not pairs:
        raise Skip("no data: no GPU-NIC pair")
    failures, observed, checked = [], {}, []
    for pair in pairs:
        for bdf in _pcie.path_between(gpus[pair["gpu"]], nics[pair["nic"]]):
            if bdf in checked:
                continue
            checked.append(bdf)
            acs = (bridges.get(bdf) or {}).get("acs")
            if acs is None:
                raise ctx.no_data(["sys/bus/pci/devices/%s/config" % bdf], "%s ACS capability" % bdf)
            if not acs.get("present"):
                observed[bdf] = "no ACS"
                continue
            ctl = acs.get("ctl") or {}
            observed[bdf] = " ".join("%s%s" % (k, "+" if v else "-") for k, v in sorted(ctl.items()))
            on = sorted(k for k, v in ctl.items() if v)
            if mode == "bare_metal" and on:
                failures.append("%s (GPU %s - %s) ACS on: %s" % (bdf, pair["gpu"], pair["nic"], ",".join(on)))
            elif mode == "virtualization":
                off = [k for k in _ACS_VIRT if not ctl.get(k)]
                if off:
                    failures.append("%s (GPU %s - %s) ACS off: %s" % (bdf, pair["gpu"], pair["nic"], ",".join(off)))
    return _outcome(failures, [], observed, {"host_mode": mode, "bridges": len(checked)})


@check("nic.ats", "ATS off on the NIC under IOMMU/ACS: peer-to-peer traffic translated by the root complex, slower",
       "mlxconfig -d <pci> set ATS_ENABLED=1, then mlxfwreset or a reboot")
def _ats(ctx):
    want = _profile.section(ctx.profile, "nic", "ats")
    if want is None:
        if _profile.section(ctx.profile, "host_mode") != "virtualization":
            raise Skip("not in profile (nic.ats; required by host_mode virtualization only)")
        want = True
    rails = _rail_nics(ctx.facts)
    if not rails:
        raise Skip("no data: no rail NIC found")
    failures, unknown, observed = [], [], {}
    for nic in rails:
        name = "mlxconfig_%s" % nic.get("pci")
        text = ctx.outputs.get(name)
        if text is None:
            unknown.append("%s not collected" % name)
            continue
        try:
            value = parse_mlxconfig(str(text), "ATS_ENABLED")
        except ValueError as exc:
            raise CheckError("outputs.%s: %s" % (name, exc))
        observed[nic.get("name")] = value
        if value != want:
            failures.append("%s (%s) ATS_ENABLED %s" % (nic.get("name"), nic.get("pci"), value))
    return _outcome(failures, unknown, observed, want)


@check("ofed.version", "an OFED release other than the fleet's (known bugs, mismatched firmware expectations)",
       "install the profile's DOCA-OFED/MLNX_OFED version")
def _ofed_version(ctx):
    want = ctx.want("ofed", "version")
    text = ctx.output("ofed_info", "ofed_info -s")
    try:
        version = parse_ofed_info(text)
    except ValueError as exc:
        raise CheckError("outputs.ofed_info: %s" % exc)
    return _outcome([] if version == want else ["installed %s" % version], [], version, want)


@check("ofed.kernel_match", "OFED modules built for another kernel: mlx5_core fails to load or the in-box driver is used",
       "rebuild the OFED kernel modules for the running kernel (dkms autoinstall, or reinstall mlnx-ofed-kernel-dkms)")
def _ofed_kernel(ctx):
    ofed = ctx.want("ofed")
    if ofed.get("kernel_match") is False:
        raise Skip("not in profile (ofed.kernel_match: false)")
    text = ctx.output("modinfo_mlx5_core", "modinfo -F vermagic mlx5_core")
    try:
        vermagic = parse_vermagic(text)
    except ValueError as exc:
        raise CheckError("outputs.modinfo_mlx5_core: %s" % exc)
    release = ctx.need((ctx.facts.get("kernel") or {}).get("release"), ["proc/sys/kernel/osrelease"])
    return _outcome([] if vermagic == release else ["mlx5_core built for %s" % vermagic], [], vermagic, release)


def _firmware(ctx, items, minimums, label):
    failures, observed, matched = [], {}, 0
    for name, keys, version in items:
        key = next((k for k in minimums if any(x and x.startswith(k) for x in keys)), None)
        observed[name] = version
        if key is None:
            continue
        matched += 1
        if version is None:
            raise ctx.no_data(["*%s*" % name], "%s firmware version" % name)
        if version_key(version) < version_key(minimums[key]):
            failures.append("%s (%s) firmware %s < %s" % (name, key, version, minimums[key]))
    if not matched:
        raise Skip("no data: no %s matches the profile's models (%s)" % (label, ", ".join(sorted(minimums))))
    return _outcome(failures, [], observed, minimums)


@check("firmware.nic", "NIC firmware below the fleet minimum: known link/RDMA bugs come back",
       "flash the NIC firmware (mlxfwmanager / mstflint) to at least the profile minimum")
def _fw_nic(ctx):
    want = ctx.want("firmware", "nic")
    nics = ctx.need(ctx.facts.get("nics"), ["sys/class/infiniband*"])
    items = [(n.get("name"), (n.get("hca_type"), n.get("board_id")), n.get("fw_ver")) for n in nics if n.get("role") != "vf"]
    return _firmware(ctx, items, want, "NIC")


@check("firmware.nvme", "NVMe firmware below the fleet minimum: known data-loss/timeout bugs come back",
       "update the drive firmware (nvme fw-download / fw-commit or the vendor tool)")
def _fw_nvme(ctx):
    want = ctx.want("firmware", "nvme")
    drives = ctx.need(ctx.facts.get("nvme"), ["sys/class/nvme*"])
    items = [(d.get("name"), (d.get("model"),), d.get("firmware")) for d in drives]
    return _firmware(ctx, items, want, "NVMe drive")


@check("storage.mounts", "scratch/VM image storage not mounted, too small or too full: provisioning or checkpoints fail later",
       "create and mount the file system (fstab), or free space on it")
def _mounts(ctx):
    want = ctx.want("storage", "mounts")
    mounts = ctx.need(ctx.facts.get("mounts"), ["proc/self/mounts"])
    failures, unknown, observed = [], [], {}
    for spec in want:
        found = [m for m in mounts if m.get("mountpoint") == spec["path"]]
        if not found:
            failures.append("%s not mounted" % spec["path"])
            observed[spec["path"]] = None
            continue
        mount = found[-1]  # the last one mounted there is what the path shows
        observed[spec["path"]] = {"device": mount.get("device"), "fstype": mount.get("fstype"),
                                  "size_bytes": mount.get("size_bytes"), "free_bytes": mount.get("free_bytes")}
        if spec.get("fstype") and mount.get("fstype") != spec["fstype"]:
            failures.append("%s is %s" % (spec["path"], mount.get("fstype")))
        for key, field in (("min_size_gb", "size_bytes"), ("min_free_gb", "free_bytes")):
            if spec.get(key) is None:
                continue
            if mount.get(field) is None:
                unknown.append("%s %s unknown (statvfs only on the live root)" % (spec["path"], field))
            elif mount[field] < spec[key] * 1e9:
                failures.append("%s %s %.1f GB < %s GB" % (spec["path"], field, mount[field] / 1e9, spec[key]))
    return _outcome(failures, unknown, observed, want)


def _probe(ctx, name):
    probe = _profile.section(ctx.profile, "probes", name) or {}
    if not probe.get("enabled"):
        raise Skip("not in profile (probes.%s.enabled: active probe off)" % name)
    return probe


@check("transport.nccl", "NCCL falling back to TCP sockets: the job runs at about half speed with no error",
       "load nvidia-peermem and the IB modules; check NCCL_IB_HCA and that the rail ports are ACTIVE (ib.ports)")
def _nccl(ctx):
    probe = _probe(ctx, "nccl")
    text = ctx.output("nccl_debug", "NCCL_DEBUG=INFO test run")
    parsed = parse_nccl_debug(text)
    expected = probe.get("transport") or "IB"
    observed = {"transports": sorted(parsed["transports"]), "hcas": parsed["hcas"]}
    if not parsed["transports"]:
        raise CheckError("outputs.nccl_debug: no 'NCCL INFO NET/<transport> : Using' line")
    failures = []
    if parsed["transports"] != set([expected]):
        failures.append("NCCL transports %s" % ", ".join(sorted(parsed["transports"])))
    if probe.get("min_hcas") is not None and len(parsed["hcas"]) < probe["min_hcas"]:
        failures.append("%d HCAs used, expected >= %d" % (len(parsed["hcas"]), probe["min_hcas"]))
    return _outcome(failures, [], observed, {"transport": expected, "min_hcas": probe.get("min_hcas")})


@check("gpu.h2d_bandwidth", "uneven or low host-to-device bandwidth (SNC off, wrong NUMA pinning, degraded link): 29-44 instead of 48 GB/s",
       "numa.layout / gpu.pcie_link remedies first; BIOS SNC per profile; re-run the probe pinned to the GPU's local CPUs")
def _h2d(ctx):
    probe = _probe(ctx, "h2d")
    text = ctx.output("h2d_bandwidth", "H2D bandwidth probe")
    try:
        runs = parse_h2d(text)
    except ValueError as exc:
        raise CheckError("outputs.h2d_bandwidth: %s" % exc)
    per_gpu = dict((gpu, round(_median(values), 2)) for gpu, values in runs.items())
    low, high = min(per_gpu.values()), max(per_gpu.values())
    observed = {"per_gpu_gbps": per_gpu, "min": low, "spread": round(high - low, 2)}
    failures = []
    gpus = ctx.facts.get("gpus")
    if gpus and len(per_gpu) < len(gpus):
        failures.append("%d of %d GPUs measured" % (len(per_gpu), len(gpus)))
    if probe.get("min_gbps") is not None and low < probe["min_gbps"]:
        failures.append("min %.1f GB/s < %s (GPUs %s)" % (low, probe["min_gbps"],
                        ", ".join(g for g, v in sorted(per_gpu.items()) if v < probe["min_gbps"])))
    if probe.get("max_spread_gbps") is not None and high - low > probe["max_spread_gbps"]:
        failures.append("spread %.2f GB/s > %s" % (high - low, probe["max_spread_gbps"]))
    return _outcome(failures, [], observed, {"min_gbps": probe.get("min_gbps"), "max_spread_gbps": probe.get("max_spread_gbps")})


CHECK_IDS = tuple(c.id for c in CHECKS)
PROBES = {"transport.nccl": "nccl", "gpu.h2d_bandwidth": "h2d"}


# ---------------------------------------------------------------- evaluation

def read_grub_sources(fs):
    """GRUB sources in the order update-grub sources them, through a Root ``fs``:
    {"sources": [(rel, text)], "problems": [...]} (etc/default/grub absent: no sources)."""
    start = len(fs.problems)
    sources = []
    text = fs.read("etc/default/grub", optional=True)
    if text is not None:
        sources.append(("etc/default/grub", text))
        for name in fs.listdir("etc/default/grub.d"):
            if name.endswith(".cfg"):
                rel = "etc/default/grub.d/" + name
                cfg = fs.read(rel)
                if cfg is not None:
                    sources.append((rel, cfg))
    return {"sources": sources, "problems": fs.problems[start:]}


def _json_safe(value):
    if isinstance(value, dict):
        return dict((str(k), _json_safe(v)) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        items = sorted(value) if isinstance(value, set) else value
        return [_json_safe(v) for v in items]
    return value


def evaluate(inputs, node=None, profile_name=None):
    """Run every check over ``inputs`` (an Inputs with a normalised profile). Returns the report."""
    required = set((inputs.profile or {}).get("require") or [])
    for check_id, probe in PROBES.items():
        if _profile.section(inputs.profile, "probes", probe, "enabled"):
            required.add(check_id)
    results = []
    for chk in CHECKS:
        observed = expected = None
        try:
            status, observed, expected, reason = chk.func(inputs)
        except Skip as exc:
            status, reason = "skip", str(exc)
        except CheckError as exc:
            status, reason = "error", str(exc)
        except Exception as exc:  # a bug in one check must not hide the others' results
            status, reason = "error", "internal error in check %s: %s: %s" % (chk.id, type(exc).__name__, exc)
        if status == "skip" and chk.id in required:
            status, reason = "fail", "required by profile, but %s" % reason
        results.append({
            "id": chk.id,
            "status": status,
            "observed": _json_safe(observed),
            "expected": _json_safe(expected),
            "reason": reason,
            "prevents": chk.prevents,
            "remedy": chk.remedy,
        })
    red = [r["id"] for r in results if r["status"] in ("fail", "error")]
    return {
        "status": "fail" if red else "pass",
        "node": node,
        "profile": profile_name if profile_name is not None else (inputs.profile or {}).get("name"),
        "failed": red,
        "counts": dict((s, sum(1 for r in results if r["status"] == s)) for s in ("pass", "fail", "skip", "error")),
        "checks": results,
    }
