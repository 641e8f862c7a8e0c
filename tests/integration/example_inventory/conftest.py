"""A private lab of the two dirty twins (twin1: SNC/HT off, GRUB and tuning faults, packages not held;
twin2: VT-d off, the 535 driver, powersave, ACS on) for the example-inventory test: the lab tests'
lab (tests/integration/lab/conftest.py) with ports shifted by +50 and containers named ``<prefix>ex-*``.

The lab's own inventory only brings the twins up; the test drives them with a site inventory made
from ``inventories/example/`` as docs/operator-guide.md sections 2 and 3 tell a new site to.
"""
import importlib.util
import os

import pytest
import yaml

_SPEC = importlib.util.spec_from_file_location(
    "gpufleet_lab_conftest_example", os.path.join(os.path.dirname(__file__), "..", "lab", "conftest.py"))
_LAB = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_LAB)
_LAB.PORT_SHIFT += 50
_LAB.PREFIX += "ex-"
REPO = _LAB.REPO
TWINS = ("twin1", "twin2")


class ExampleLab(_LAB.Lab):
    def write_inventory(self):
        super().write_inventory()
        path = os.path.join(self.inventory_dir, "hosts.yml")
        with open(path) as handle:
            inv = yaml.safe_load(handle)
        group = inv["all"]["children"]["lab_twins"]
        group["hosts"] = {name: group["hosts"][name] for name in TWINS}
        inv["all"]["children"]["fabric_capture"]["hosts"] = {"twin1": None}
        self.hosts = {name: self.hosts[name] for name in TWINS}
        with open(path, "w") as handle:
            yaml.safe_dump(inv, handle, sort_keys=False)


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The private lab of twin1 and twin2, torn down at the end."""
    yield from _LAB.lab_of(ExampleLab, tmp_path_factory)
