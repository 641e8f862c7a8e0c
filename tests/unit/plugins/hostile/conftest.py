"""Hostile inputs: what a careless or hostile operator, a broken BMC or a half-written file throws
at every module, filter, lookup and inventory plugin (issue "Bad input never harms").

Each test names its case and asserts one outcome class:
- ``error``: a clear failure whose message names the input (the option, path, host or key) and
  the cause; nothing was written or sent before it (the test checks the files / requests);
- ``ok``: the documented right result.
Never a traceback, a hang, a silent success on garbage or a change made before failing.

``run_module(name, args, check=False)`` runs a module as Ansible runs it (the module file as a
program, its arguments as ANSIBLE_MODULE_ARGS on standard input, the collection on the path) in a
few hundred milliseconds instead of an ad hoc ansible run's seconds, with a time limit: a module
that blocks is a failure of the test, not a stuck CI.
"""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
BUILD = os.path.join(REPO, ".build")
MODULES = os.path.join(REPO, "plugins", "modules")


class Outcome(dict):
    """The module's JSON result plus ``_rc``, ``_stderr`` and ``_traceback`` (True when Python
    printed one, or the output was not a module's JSON)."""

    @property
    def failed(self):
        return bool(self.get("failed"))

    @property
    def msg(self):
        return self.get("msg", "")


def _run(name, args, check=False, timeout=30, env=None):
    payload = dict(args)
    if check:
        payload["_ansible_check_mode"] = True
    payload.setdefault("_ansible_tmpdir", None)
    proc_env = dict(os.environ, PYTHONPATH=BUILD + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc_env.update(env or {})
    try:
        proc = subprocess.run([sys.executable, os.path.join(MODULES, name + ".py")],
                              input=json.dumps({"ANSIBLE_MODULE_ARGS": payload}),
                              capture_output=True, text=True, timeout=timeout, env=proc_env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("module %s hung (no answer in %d s) on %r" % (name, timeout, args))
    out = Outcome()
    try:
        out.update(json.loads(proc.stdout))
        out["_traceback"] = "Traceback (most recent call last)" in proc.stderr or "exception" in out
    except ValueError:
        out["_traceback"] = True
    out["_rc"] = proc.returncode
    out["_stderr"] = proc.stderr
    out["_stdout"] = proc.stdout
    return out


@pytest.fixture
def run_module():
    """run_module("kernel_cmdline", {...}, check=False) -> Outcome."""
    return _run


def assert_clear_error(outcome, *names):
    """A failure, no traceback, and a message that names every one of ``names`` (case-insensitive)."""
    assert not outcome["_traceback"], "traceback: %s%s" % (outcome["_stderr"][-2000:], outcome.get("exception", ""))
    assert outcome.failed, "silent success on bad input: %r" % dict(outcome)
    msg = outcome.msg.lower()
    for name in names:
        assert str(name).lower() in msg, "message does not name %r: %s" % (name, outcome.msg)


def assert_ok(outcome):
    assert not outcome["_traceback"], "traceback: %s" % outcome["_stderr"][-2000:]
    assert not outcome.failed, outcome.msg


@pytest.fixture
def clear_error():
    return assert_clear_error


@pytest.fixture
def succeeded():
    return assert_ok
