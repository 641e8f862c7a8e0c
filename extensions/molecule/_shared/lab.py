"""The lab for molecule: the lab tests' private lab (shifted ports, prefixed containers: the
GPUFLEET_LABTEST_SHIFT / GPUFLEET_LABTEST_PREFIX environment, as for the lab tests), its state and
inventory in <checkout>/.build/molecule-lab. `python extensions/molecule/_shared/lab.py inventory|up|down`.
`inventory` writes the inventory only; up and down are run by the scenarios' create and destroy
playbooks. Molecule itself reads the same inventory through `inventory.py` (no file to generate
first). Never touches the default lab."""
import importlib.util
import os
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
BASE = os.environ.get("GPUFLEET_MOLECULE_LAB", os.path.join(REPO, ".build", "molecule-lab"))


def _lab_class():
    # the lab tests' Lab (inventory with shifted ports, lab.sh with the private state and prefix)
    spec = importlib.util.spec_from_file_location("gpufleet_molecule_lab",
                                                  os.path.join(REPO, "tests", "integration", "lab", "conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Lab


def inventory():
    """The private lab's inventory (the YAML lab.sh reads), written and returned."""
    os.makedirs(BASE, exist_ok=True)
    lab = _lab_class()(BASE)
    lab.write_inventory()
    with open(os.path.join(BASE, "inventory", "hosts.yml")) as handle:
        return yaml.safe_load(handle)


def main(action):
    os.makedirs(BASE, exist_ok=True)
    lab = _lab_class()(BASE)
    lab.write_inventory()
    if action == "inventory":
        print(os.path.join(BASE, "inventory"))
        return 0
    proc = lab.lab_sh(action, timeout=1500)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("inventory", "up", "down", "status"):
        sys.exit("usage: lab.py inventory|up|down|status")
    sys.exit(main(sys.argv[1]))
