"""Records, per task and host, whether the task reported a change: one JSON line per result in
$GPUFLEET_RECORD_CHANGES (a test's comparison of a ``--check --diff`` run with the real one)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: record_changes
type: aggregate
short_description: record each task's changed flag per host (tests only)
description: One JSON line per task result in the file named by GPUFLEET_RECORD_CHANGES.
requirements: [enable in callbacks_enabled]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "record_changes"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._path = os.environ.get("GPUFLEET_RECORD_CHANGES")
        self._play = None

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def _record(self, result, status):
        if not self._path:
            return
        task = result._task
        line = {"play": self._play, "role": task._role.get_name() if task._role else None,
                "task": task.get_name(), "host": result._host.get_name(), "status": status,
                "changed": bool(result._result.get("changed")) and status == "ok",
                "msg": str(result._result.get("msg") or result._result.get("skip_reason") or "")[:300]}
        with open(self._path, "a") as handle:
            handle.write(json.dumps(line) + "\n")

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")
