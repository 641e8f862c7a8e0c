#!/usr/bin/env python3
"""The RoCE rail address plan of a whole fleet, in process: every host's plan from its own index
(as the rail_addresses filter makes it on a job slice) and the whole-fleet validation.

    .venv/bin/python benchmarks/roce_address_bench.py [--nodes 8192] [--rails 8] [--repeat 3]

Three layouts of the same fleet (docs/profile.md "RoCE v2 rails"):

- ``flat``: supernet 10.64.0.0/15 cut into eight /18 rails (16,381 hosts each: a /19's 8,189 is
  too few for 8,192 nodes, and the planner says so);
- ``routed``: supernet 10.64.0.0/14, one /17 block per rail, a /26 per SU of 32 hosts (512 SUs);
- ``explicit``: the routed plan written out as the site's own ``rails`` list (rails x SUs entries):
  the validation of the profile itself (overlaps, completeness) grows with it.

Per layout, best of ``--repeat`` runs (this machine's CPU time varies by 10-30 %): the profile's
plan (parse and validate the spec), every host's plan (``host_plan``: the dicts the role and
fabric.json get), the whole-fleet validation (``validate_fleet``: no index or address twice), CPU
time (``time.process_time``) of each, and the peak memory the whole run allocates (tracemalloc) and
the process's peak RSS (``resource``). Every host plan is checked against the address computed by
hand-written arithmetic (first host's address + index), so a fast wrong answer cannot pass.
"""
import argparse
import os
import resource
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.path.join(REPO, ".build")
COLL = os.path.join(BUILD, "ansible_collections", "gpufleet", "provision")
if not os.path.lexists(COLL):
    os.makedirs(os.path.dirname(COLL), exist_ok=True)
    os.symlink(REPO, COLL)
sys.path.insert(0, BUILD)

from ansible_collections.gpufleet.provision.plugins.module_utils._roce import addressing as A  # noqa: E402


def layouts(rails, su_size):
    sus = 512
    explicit = [{"rail": r, "su": s, "subnet": "%s/26" % A.dotted((10 << 24 | 64 << 16) + r * (1 << 15) + s * 64),
                 "gateway": None} for r in range(rails) for s in range(sus)]
    return {
        "flat": {"supernet": "10.64.0.0/15", "rail_prefix": 18},
        "routed": {"supernet": "10.64.0.0/14", "rail_prefix": 26, "per_su": True, "su_size": su_size},
        "explicit": {"rails": explicit, "su_size": su_size},
    }


def expected(spec, index, rail, su_size):
    """The address by plain arithmetic, independent of the planner's code path."""
    base = (10 << 24) | (64 << 16)
    if "supernet" in spec and not spec.get("per_su"):
        return base + rail * (1 << 14) + 2 + index
    return base + rail * (1 << 15) + (index // su_size) * 64 + 2 + index % su_size


def run(spec, nodes, rails, su_size):
    t0 = time.process_time()
    plan = A.plan(spec, rails)
    t1 = time.process_time()
    plans = [A.host_plan(plan, "gpu%05d" % i, i, mtu=9000) for i in range(nodes)]
    t2 = time.process_time()
    summary = A.validate_fleet(plan, [{"host": "gpu%05d" % i, "index": i} for i in range(nodes)])
    t3 = time.process_time()
    for i in (0, 1, nodes // 3, nodes - 1):
        for rail in range(rails):
            got = plans[i]["rails"][rail]["address"]
            want = A.dotted(expected(spec, i, rail, su_size))
            assert got == want, (i, rail, got, want)
    assert summary["addresses"] == nodes * rails and summary["hosts"] == nodes
    return {"spec": t1 - t0, "hosts": t2 - t1, "fleet": t3 - t2, "summary": summary}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=8192)
    parser.add_argument("--rails", type=int, default=8)
    parser.add_argument("--su-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("RoCE address plan: %d nodes x %d rails = %d addresses (python %s)"
          % (args.nodes, args.rails, args.nodes * args.rails, sys.version.split()[0]))
    print("%-9s %9s %10s %10s %10s %11s  %s" % ("layout", "spec s", "hosts s", "fleet s", "total s", "peak MiB", "fullest subnet"))
    for name, spec in layouts(args.rails, args.su_size).items():
        best = None
        for _ in range(args.repeat):
            got = run(spec, args.nodes, args.rails, args.su_size)
            total = got["spec"] + got["hosts"] + got["fleet"]
            if best is None or total < best[0]:
                best = (total, got)
        tracemalloc.start()
        run(spec, args.nodes, args.rails, args.su_size)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        total, got = best
        full = got["summary"]["fullest"]
        print("%-9s %9.3f %10.3f %10.3f %10.3f %11.1f  %s %d/%d" % (
            name, got["spec"], got["hosts"], got["fleet"], total, peak / 1048576.0, full["subnet"], full["used"],
            full["capacity"]))
    print("process peak RSS: %.1f MiB" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0))


if __name__ == "__main__":
    main()
