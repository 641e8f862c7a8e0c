"""Every module, filter, lookup and inventory plugin meets hostile input somewhere in this folder.

Each ``test_*.py`` here declares ``COVERS``: the plugins it throws bad input at, as
``"<kind>:<name>"`` (kind: module, filter, lookup, inventory). A plugin added without a hostile test
fails this test, naming it.
"""
import ast
import glob
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.join(HERE, "..", "..", "..", "..", "plugins")


def _shipped():
    names = set()
    for path in glob.glob(os.path.join(PLUGINS, "modules", "*.py")):
        names.add("module:" + os.path.basename(path)[:-3])
    # each filter has its documentation file, named as the filter
    for path in glob.glob(os.path.join(PLUGINS, "filter", "*.yml")):
        names.add("filter:" + os.path.basename(path)[:-4])
    for kind in ("lookup", "inventory"):
        for path in glob.glob(os.path.join(PLUGINS, kind, "*.py")):
            names.add("%s:%s" % (kind, os.path.basename(path)[:-3]))
    return names


def _covered():
    covered = {}
    for path in sorted(glob.glob(os.path.join(HERE, "test_*.py"))):
        name = os.path.basename(path)[:-3]
        if name == "test_coverage":
            continue
        with open(path) as handle:
            tree = ast.parse(handle.read())
        # COVERS is a literal list at module level: read it without importing the test
        covers = [ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                  and any(getattr(t, "id", None) == "COVERS" for t in node.targets)]
        assert covers, "%s declares no COVERS list" % path
        for item in covers[0]:
            covered.setdefault(item, []).append(name)
    return covered


def test_every_plugin_has_hostile_cases():
    shipped = _shipped()
    assert len(shipped) > 30, sorted(shipped)
    covered = _covered()
    missing = sorted(shipped - set(covered))
    assert missing == [], "plugins without hostile-input tests: %s" % ", ".join(missing)
    unknown = sorted(set(covered) - shipped)
    assert unknown == [], "COVERS names plugins that do not exist: %s" % unknown
