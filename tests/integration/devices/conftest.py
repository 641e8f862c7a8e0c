"""The lab fixture of tests/integration/lab (a private test lab: GPUFLEET_LABTEST_SHIFT/PREFIX), for
the device roles' tests on twins."""
import importlib.util
import os

_SPEC = importlib.util.spec_from_file_location(
    "gpufleet_lab_conftest", os.path.join(os.path.dirname(os.path.dirname(__file__)), "lab", "conftest.py"))
_LAB = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_LAB)
# Its own lab beside the other folders' (one pytest run brings several up): own ports and names.
_LAB.PORT_SHIFT += 30
_LAB.PREFIX += "dev-"

lab = _LAB.lab  # noqa: F401  (the session fixture, re-exported)
