"""Regenerate the captured fixture trees: tests/fixtures/trees/<name>.yml -> <name>.ttar.

Each <name>.yml names a model (lab/hw/models/<model>.yml) and a state; the renderer writes the tree
and ttar packs it. Tests compare a fresh render with the committed archive (no drift) and check
the facts read from it against expectations written by hand, not by this generator.

    python -m lab.hw.fixtures            # rewrite every archive
    python -m lab.hw.fixtures --check    # exit 1 when an archive differs from a fresh render
"""
import argparse
import os
import sys
import tempfile

import yaml

from lab.hw import render, ttar

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TREES = os.path.join(REPO, "tests", "fixtures", "trees")
MODELS = os.path.join(HERE, "models")


def load_model(name):
    with open(os.path.join(MODELS, name + ".yml")) as handle:
        return yaml.safe_load(handle)


def build(name):
    """Render fixture ``name`` and return its ttar text."""
    with open(os.path.join(TREES, name + ".yml")) as handle:
        spec = yaml.safe_load(handle)
    with tempfile.TemporaryDirectory() as tmp:
        render.render(load_model(spec["model"]), spec.get("state") or {}, tmp)
        for rel, content in sorted((spec.get("extra_files") or {}).items()):
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write(content)
        return ttar.pack(tmp)


def names():
    return sorted(f[:-4] for f in os.listdir(TREES) if f.endswith(".yml"))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    stale = []
    for name in names():
        text = build(name)
        path = os.path.join(TREES, name + ".ttar")
        old = open(path).read() if os.path.exists(path) else None
        if args.check:
            if old != text:
                stale.append(name)
        elif old != text:
            with open(path, "w") as handle:
                handle.write(text)
            print("wrote %s (%d bytes)" % (path, len(text)))
    if stale:
        print("stale fixture archives (run python -m lab.hw.fixtures): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
