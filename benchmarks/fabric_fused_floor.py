#!/usr/bin/env python3
"""The fused floor: the least any Ansible module can do to write the fabric's two big outputs in CPython.

    PYTHONPATH=.build .venv/bin/python benchmarks/fabric_fused_floor.py ARGS.json

Run by ``fabric_bench.py`` beside the module and the regex floor, with the module's arguments
(``ibnetdiscover``: one capture, ``dest``). It is what a design that fuses parse and model into one
pass would do at the least, and nothing else:

- start as an Ansible module (AnsibleModule, arguments, ``exit_json``), as the module must;
- parse in 1 MiB pieces: each switch block by one pattern and its port lines by one ``findall``, all
  adapter blocks of a piece by one ``findall`` (the common forms only: a garbled or odd block is
  skipped, not reported);
- one rail entry per adapter, made from the parse directly (no link or node records), its link
  confirmed against the switch's listing, the rail of a leaf the majority adapter name on it;
- fabric.json with the nodes and their rail entries and the switches with their uplinks, and
  labels.json, both through the C encoder (no escaping check, no digest, no comparison with the
  files already there).

It checks nothing else: no anomaly, no scalable unit, spine group or block, no facts, no quarantine,
no NCCL or Slurm file, no summary. Its CPU is therefore a floor below any implementation of the issue
in CPython: the module can approach it, not pass it. It shares no code with the module.
"""
import gc
import io
import json
import os
import re
from collections import Counter, defaultdict

from ansible.module_utils.basic import AnsibleModule

_SWITCH = re.compile(
    r'vendid=0x[0-9a-f]+\ndevid=0x[0-9a-f]+\nsysimgguid=0x[0-9a-f]+\nswitchguid=0x[0-9a-f]+(?:\([0-9a-f]+\)|)\n'
    r'Switch[ \t]+([0-9]+)[ \t]+"S-([0-9a-f]{16})"[ \t]*#[ \t]*"(?:MF0;|)([^":]*)(?::([^"]*)|)"[^\n]*\n')
_SWITCH_PORT = re.compile(
    r'^\[([0-9]+)\][ \t]+"[SH]-([0-9a-f]{16})"\[([0-9]+)\](?:\([0-9a-f]+\)|)[ \t]*#[ \t]*'
    r'"[^"\n]*"[ \t]*lid[ \t]+[0-9]+[ \t]+([0-9]+)x([A-Z0-9]+)[ \t]*\n', re.MULTILINE)
_ADAPTER = re.compile(
    r'vendid=0x[0-9a-f]+\ndevid=0x[0-9a-f]+\nsysimgguid=0x[0-9a-f]+\n'
    r'caguid=0x[0-9a-f]+\nCa[ \t]+[0-9]+[ \t]+"H-([0-9a-f]{16})"[ \t]*#[ \t]*"([^"\n]*)"[^\n]*\n'
    r'\[[0-9]+\]\([0-9a-f]+\)[ \t]+"S-([0-9a-f]{16})"\[([0-9]+)\][ \t]*#[ \t]*'
    r'lid[ \t]+[0-9]+[ \t]+lmc[ \t]+[0-9]+[ \t]+"[^"\n]*"[ \t]*lid[ \t]+[0-9]+[ \t]+([0-9]+)x([A-Z0-9]+)[ \t]*\n\n')
PIECE = 1 << 20


def pieces(handle):
    """The file in pieces of about PIECE characters that end after a blank line."""
    rest = ""
    while True:
        data = handle.read(PIECE)
        if not data:
            break
        data = rest + data
        cut = data.rfind("\n\n") + 2
        if cut < 2:
            rest = data
            continue
        yield data[:cut]
        rest = data[cut:]
    if rest:
        yield rest


def read(path):
    """-> (switches {name: record}, hosts {host: [rail entry]}, links confirmed from both ends)."""
    names, switches, listed = {}, {}, {}
    hosts = defaultdict(list)
    confirmed = 0
    with io.open(path, encoding="utf-8", errors="replace", newline="\n") as handle:
        for text in pieces(handle):
            end = len(text)
            first_adapter = text.find("\ncaguid=")
            first_adapter = end if first_adapter < 0 else text.rfind("\n\n", 0, first_adapter) + 2
            pos = 0
            while pos < first_adapter:
                m = _SWITCH.match(text, pos)
                if m is None:
                    pos = text.find("\nvendid=", pos) + 1 or end
                    continue
                nports, guid, name, model = m.groups()
                names[guid] = name
                uplinks = {}
                switches[name] = {"name": name, "guid": guid, "model": model, "ports": int(nports), "uplinks": uplinks}
                last = text.find("\n\n", m.end() - 1) + 1 or end
                for port, peer, peer_port, width, speed in _SWITCH_PORT.findall(text, m.end(), last):
                    listed[(guid, port)] = (peer, peer_port, width, speed)
                    if (peer, peer_port) in listed and peer in names:
                        uplinks[names[peer]] = uplinks.get(names[peer], 0) + 1
                        confirmed += 1
                pos = last + 1
            for guid, desc, leaf, port, width, speed in _ADAPTER.findall(text, first_adapter):
                other = listed.get((leaf, port))
                if other is not None and other[0] == guid and other[2] == width and other[3] == speed:
                    confirmed += 1
                words = desc.split()
                if not words or leaf not in names:
                    continue
                hosts[words[0]].append({"rail": None, "hca": words[-1], "guid": guid, "leaf": names[leaf],
                                        "port": int(port), "width": int(width), "speed": speed, "rail_from": "name"})
    return switches, hosts, confirmed


def rails(hosts):
    """The rail of each leaf: the index of its majority adapter name among all leaves' majorities."""
    votes = defaultdict(Counter)
    for nics in hosts.values():
        for nic in nics:
            votes[nic["leaf"]][nic["hca"]] += 1
    majority = dict((leaf, c.most_common(1)[0][0]) for leaf, c in votes.items())
    index = dict((name, i) for i, name in enumerate(sorted(set(majority.values()))))
    return dict((leaf, index[name]) for leaf, name in majority.items())


def outputs(hosts, leaf_rail, prefix="fabric.gpufleet.io/"):
    nodes, items = {}, []
    for host in sorted(hosts):
        nics = hosts[host]
        labels = {prefix + "status": "green", prefix + "rails": str(len(nics))}
        for nic in nics:
            nic["rail"] = leaf_rail[nic["leaf"]]
            labels[prefix + "rail%d-leaf" % nic["rail"]] = nic["leaf"]
        nodes[host] = {"status": "green", "rails": nics}
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"labels": dict(sorted(labels.items())), "name": host}})
    return nodes, {"apiVersion": "v1", "kind": "List", "items": items}


def write(dest, nodes, switches, labels):
    compact = json.JSONEncoder(separators=(",", ":"), check_circular=False)
    if not os.path.isdir(dest):
        os.makedirs(dest)
    with open(os.path.join(dest, "fabric.json"), "w") as out:
        out.write('{"nodes":{')
        pairs = list(nodes.items())
        for start in range(0, len(pairs), 32):
            out.write(("," if start else "") + compact.encode(dict(pairs[start:start + 32]))[1:-1])
        out.write('},"switches":' + compact.encode(switches) + "}\n")
    with open(os.path.join(dest, "labels.json"), "w") as out:
        out.write(json.JSONEncoder(separators=(",", ":"), check_circular=False, sort_keys=True).encode(labels) + "\n")


def main():
    module = AnsibleModule(argument_spec=dict(ibnetdiscover=dict(type="list", elements="path", required=True),
                                              dest=dict(type="path", required=True),
                                              topology_statuses=dict(type="list", elements="str")))
    gc.disable()
    switches, hosts, confirmed = read(module.params["ibnetdiscover"][0])
    nodes, labels = outputs(hosts, rails(hosts))
    write(module.params["dest"], nodes, switches, labels)
    module.exit_json(changed=True, nodes=len(nodes), nics=sum(len(n) for n in hosts.values()),
                     switches=len(switches), confirmed=confirmed)


if __name__ == "__main__":
    main()
