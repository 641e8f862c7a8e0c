# -*- coding: utf-8 -*-
# Benchmark helper (not part of the collection): wall time of every task, written as JSON lines.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
name: task_timer
type: aggregate
short_description: write each task's wall time to $TASK_TIMER_OUT
description: Benchmark helper of gpufleet.provision.
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_timer"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._start = {}

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start[task._uuid] = time.perf_counter()

    def _done(self, result, status):
        start = self._start.get(result._task._uuid)
        if start is None:
            return
        with open(os.environ["TASK_TIMER_OUT"], "a") as handle:
            handle.write(json.dumps({"task": result._task.get_name(), "status": status,
                                     "seconds": time.perf_counter() - start}) + "\n")

    def v2_runner_on_ok(self, result):
        self._done(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._done(result, "failed")
