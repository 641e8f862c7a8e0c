"""The layout docs/architecture.md describes, held: module_utils by domain, imports only downwards
in the flow, nothing of ours imported from a module, a plugin, the lab or a test, tests that mirror."""
import ast
import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MU = os.path.join(REPO, "plugins", "module_utils")
TESTS = os.path.join(REPO, "tests", "unit", "plugins", "module_utils")
PREFIX = "ansible_collections.gpufleet.provision.plugins."

# Written by hand from docs/architecture.md "Rules of the house": which sub-package may import which.
ALLOWED = {
    "_node": set(),
    "_os": {"_node"},
    "_devices": {"_node"},
    "_bmc": {"_node"},
    "_desired": {"_node", "_os", "_bmc", "_devices", "_roce"},
    "_gate": {"_node", "_os", "_bmc", "_devices", "_desired", "_roce"},
    "_fabric": {"_node", "_roce"},
    "_roce": {"_node"},
}


def _packages():
    return sorted(name for name in os.listdir(MU) if os.path.isdir(os.path.join(MU, name)) and name != "__pycache__")


def _imports(path):
    """(line, imported dotted name) of every import of ours in a file: 'from X import a' gives X.a."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            for alias in node.names:
                yield node.lineno, node.module[len(PREFIX):] + "." + alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    yield node.lineno, alias.name[len(PREFIX):]


def _files(package):
    for folder, dirs, files in os.walk(os.path.join(MU, package)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def test_every_module_util_lives_in_a_domain_package():
    flat = [name for name in os.listdir(MU) if name.endswith(".py") and name != "__init__.py"]
    assert flat == [], "flat module_utils files (put each in its domain's sub-package): %s" % flat
    assert set(_packages()) >= set(ALLOWED), "a domain package of docs/architecture.md is missing"
    for package in _packages():
        assert os.path.isfile(os.path.join(MU, package, "__init__.py")), package
        assert package.startswith("_"), "module_utils are private: %s" % package


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_go_downwards_in_the_flow(package):
    wrong = []
    for path in _files(package):
        for line, name in _imports(path):
            parts = name.split(".")
            where = "%s:%d imports %s" % (os.path.relpath(path, REPO), line, name)
            if parts[0] != "module_utils":
                wrong.append(where + " (module_utils never import modules, plugins or action code)")
            elif parts[1] != package and parts[1] not in ALLOWED[package]:
                wrong.append(where + " (%s may import only %s)" % (package, sorted(ALLOWED[package]) or "itself"))
    assert wrong == []


def test_every_package_has_its_place_in_the_rules():
    """A new domain package (guest planner, image, RoCE) states what it may import: in ALLOWED here and
    in docs/architecture.md, together."""
    assert sorted(ALLOWED) == _packages()
    with open(os.path.join(REPO, "docs", "architecture.md")) as handle:
        doc = handle.read()
    missing = [name for name in _packages() if "`%s/`" % name not in doc]
    assert missing == [], "sub-packages docs/architecture.md does not name: %s" % missing


def test_tests_mirror_the_packages():
    """Each package with code has its test folder of the same name (tests mirror plugins/)."""
    missing = [name for name in _packages() if list(_files(name)) and not os.path.isdir(os.path.join(TESTS, name))]
    assert missing == [], "no tests/unit/plugins/module_utils/<package>/ for %s" % missing
    stray = sorted(name for name in os.listdir(TESTS) if name.startswith("test_") and name != "test_layout.py")
    assert stray == [], "test files outside a package folder: %s" % stray
