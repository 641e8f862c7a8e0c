# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bandwidth probe outputs (nvbandwidth, nccl-tests, perftest, the shipped probe script): pure parsers, ValueError on garbage."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_RUNNING = re.compile(r"^\s*Running\s+(\w+)\.?\s*$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def parse_nvbandwidth(text):
    """nvbandwidth output -> {test case: [rows]} where a row is [float | None] (``N/A`` -> None).

    Each test case starts with ``Running <name>.``, then a title, a header of column numbers and one
    line per row (row number first)::

        Running host_to_device_memcpy_ce.
        memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
                   0         1
         0     55.37     55.36

        SUM host_to_device_memcpy_ce 110.73

    A full run holds many cases with the same title shape (``host_to_all_memcpy_ce``,
    ``host_to_device_memcpy_sm``): a case is known by its name only. Several runs of one case
    (several invocations in one output) give its rows once per run, in order.
    """
    cases = {}
    name, columns, rows = None, None, None
    for line in text.splitlines():
        match = _RUNNING.match(line)
        if match:
            name, columns, rows = match.group(1), None, []
            cases.setdefault(name, [])
            continue
        if name is None:
            continue
        fields = line.split()
        if not fields or fields[0] in ("SUM", "NOTE:", "Waived:") or line.lstrip().startswith(("memcpy", "memory")):
            if fields and fields[0] == "SUM" and rows:
                cases[name].append(rows)
                name = None
            continue
        if columns is None:
            if all(f.isdecimal() for f in fields):
                columns = len(fields)
            continue
        if not fields[0].isdecimal():
            continue
        values = fields[1:]
        if len(values) != columns:
            raise ValueError("nvbandwidth %s: row %s has %d values for %d columns" % (name, fields[0], len(values), columns))
        rows.append([float(v) if _NUMBER.match(v) else None for v in values])
    for case, runs in cases.items():
        if name == case and rows:
            runs.append(rows)      # the last case without its SUM line (older versions)
    return dict((k, v) for k, v in cases.items() if v)


def parse_h2d(text):
    """Host-to-device bandwidth per GPU -> {gpu: [GB/s per run]}.

    nvbandwidth: only the ``host_to_device_memcpy_ce`` case (one row, a column per GPU): a full run
    also prints ``host_to_all_memcpy_ce`` and the SM cases under the same title, and averaging
    them reads 55 GB/s as 37. The shipped probe prints one line per GPU and run::

        GPU 0000:18:00.0: 48.91 GB/s
    """
    runs = {}
    for line in text.splitlines():
        match = re.match(r"^\s*GPU\s+(\S+?)\s*:\s*(\d+(?:\.\d+)?)\s*GB/s", line)
        if match:
            runs.setdefault(match.group(1), []).append(float(match.group(2)))
    for matrix in parse_nvbandwidth(text).get("host_to_device_memcpy_ce", []):
        for col, value in enumerate(matrix[0]):
            if value is not None:
                runs.setdefault(str(col), []).append(value)
    if not runs:
        raise ValueError("no 'GPU <n>: <x> GB/s' line or nvbandwidth host_to_device_memcpy_ce matrix")
    return runs


P2P_CASES = ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce")


def parse_p2p(text):
    """nvbandwidth device-to-device matrix (GPU(row) -> GPU(column), ``N/A`` on the diagonal) ->
    {"case": name, "pairs": {"0-1": GB/s, ...}} of the first P2P case present (read, else write)."""
    cases = parse_nvbandwidth(text)
    for case in P2P_CASES:
        if case in cases:
            pairs = {}
            for matrix in cases[case]:
                for row, values in enumerate(matrix):
                    for col, value in enumerate(values):
                        if value is not None and row != col:
                            key = "%d-%d" % (row, col)
                            pairs[key] = min(pairs.get(key, value), value)
            if pairs:
                return {"case": case, "pairs": pairs}
    raise ValueError("no nvbandwidth %s matrix" % " or ".join(P2P_CASES))


def parse_nccl_tests(text):
    """nccl-tests (all_reduce_perf) -> {"busbw_gbps": out-of-place busbw of the largest size,
    "size": bytes, "avg_busbw_gbps": the "# Avg bus bandwidth" line, "wrong": #wrong summed}::

        #       size         count      type   redop    root     time   algbw   busbw #wrong     time ...
        #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us) ...
         17179869184    4294967296     float     sum      -1    74321  231.15  433.41      0    74298 ...
        # Avg bus bandwidth    : 433.39

    Column positions come from the header (older versions have no ``root`` column).
    """
    header, rows, avg = None, [], None
    for line in text.splitlines():
        stripped = line.strip()
        # lines may carry an MPI rank prefix ("0: ")
        stripped = re.sub(r"^\d+:\s", "", stripped)
        if stripped.startswith("#"):
            words = stripped.lstrip("#").split()
            if "size" in words and "busbw" in words and header is None:
                header = words
            match = re.search(r"Avg bus bandwidth\s*:\s*(\d+(?:\.\d+)?)", stripped)
            if match:
                avg = float(match.group(1))
            continue
        fields = stripped.split()
        if header and fields and fields[0].isdecimal() and len(fields) >= header.index("busbw") + 1:
            try:
                rows.append((int(fields[0]), float(fields[header.index("busbw")]),
                             fields[header.index("#wrong")] if "#wrong" in header else "0"))
            except ValueError:
                continue
    if not rows and avg is None:
        raise ValueError("no nccl-tests result row or '# Avg bus bandwidth' line")
    out = {"avg_busbw_gbps": avg, "busbw_gbps": avg, "size": None, "wrong": 0}
    if rows:
        size, busbw, _wrong = max(rows)
        out.update(busbw_gbps=busbw, size=size)
        out["wrong"] = sum(int(w) for _s, _b, w in rows if w.isdecimal())
    return out


_GDR_HEADER = re.compile(r"^#\s*gdr\s+(\S+)\s+cuda\s+(\d+)(?:\s+\((\S+)\))?")


def parse_ib_write_bw(text):
    """perftest ``ib_write_bw --report_gbits`` results -> {"<nic> cuda <n>": Gb/s (BW average)} or,
    without the probe's section headers, {"": Gb/s}. The probe prints ``# gdr mlx5_0 cuda 0
    (0000:18:00.0)`` before each rail's client output::

         #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
         8388608    5000             392.45             392.40               0.005847

    A section without a result row (``--use_cuda`` unsupported, no peer) maps to None.
    """
    out, section, column = {}, "", None
    for line in text.splitlines():
        match = _GDR_HEADER.match(line.strip())
        if match:
            section, column = "%s cuda %s" % (match.group(1), match.group(2)), None
            out[section] = None
            continue
        if "BW average[" in line:
            # "#bytes  #iterations BW peak[Gb/sec] ...": one space may separate two columns.
            names = re.findall(r"#\w+|[A-Za-z][\w ]*?\[[^\]]+\]", line)
            column = next(i for i, n in enumerate(names) if n.startswith("BW average"))
            if "Gb/sec" not in names[column]:
                raise ValueError("ib_write_bw reports %s: run it with --report_gbits" % names[column])
            continue
        fields = line.split()
        if column is not None and fields and fields[0].isdecimal() and len(fields) > column:
            try:
                out[section] = float(fields[column])
            except ValueError:
                continue
    if not out:
        raise ValueError("no ib_write_bw 'BW average[Gb/sec]' result")
    return out
