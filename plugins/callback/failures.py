# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Records the task and message of each failed or unreachable host for the end-of-run summary."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: failures
type: aggregate
short_description: Record each failed host's task and message for the end-of-run summary
version_added: 0.1.0
description:
  - A host whose task fails leaves the play, and Ansible keeps no variable that says why. This
    callback records the failed task's name and message as the host variable C(gpufleet_failure)
    (C({task, msg})), so the summary play at the end of C(gpufleet.provision.provision) and
    C(gpufleet.provision.validate) prints FAILED nodes with their cause.
  - When every node failed, Ansible stops before the summary play; this callback then prints the
    FAILED lines itself at the end of the run.
  - Results of C(no_log) tasks are already censored when they reach a callback; their message is
    not recorded. Failures of tasks with C(ignore_errors) are not failures of the host.
  - It also loads the collection's action plugin of each task (and the profile lookup) in the
    controller's main process when the task starts, before its workers fork, so that they inherit
    them compiled; Ansible's collection loader keeps no bytecode, and each forked worker would
    compile the plugin and its module_utils again (15-30 ms of CPU per node and task).
  - Enable it with C(callbacks_enabled = gpufleet.provision.failures) in C(ansible.cfg) (the
    checkout's and an AWX project's C(ansible.cfg) do) or C(ANSIBLE_CALLBACKS_ENABLED).
author: gpufleet maintainers (@gpufleet)
requirements:
  - enable in configuration
"""

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, lookup_loader

SUMMARY_TASK = "Show the summary"  # playbooks/summary.yml
COLLECTION = "gpufleet.provision."
PRELOAD_LOOKUPS = ("gpufleet.provision.profile",)
MSG_WIDTH = 300


def failure_message(result):
    """The message of a failed task result, one line (a module's msg, a command's stderr, ...)."""
    if not isinstance(result, dict):
        return to_text(result)
    if result.get("censored"):
        return "output hidden (no_log)"
    for key in ("msg", "reason", "stderr", "module_stderr", "exception"):
        value = result.get(key)
        if value:
            text = " ".join(to_text(value).split())
            return text if len(text) <= MSG_WIDTH else text[:MSG_WIDTH - 3] + "..."
    failed_items = [r for r in result.get("results") or [] if isinstance(r, dict) and r.get("failed")]
    if failed_items:
        return failure_message(failed_items[0])
    return "failed without a message"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.provision.failures"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._variable_manager = None
        self.failures = {}
        self.summary_ran = False
        self._preloaded = set()

    def v2_playbook_on_play_start(self, play):
        self._variable_manager = play.get_variable_manager()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._preload(getattr(task, "action", None))

    def _preload(self, action):
        """The collection's action plugin of a task starting (and the lookups its tasks template),
        loaded here before the task's workers fork: each inherits them instead of compiling them.
        A module without an action plugin loads nothing; a failure is left for the task to report."""
        if not isinstance(action, str) or not action.startswith(COLLECTION) or action in self._preloaded:
            return
        self._preloaded.add(action)
        try:
            action_loader.get(action, class_only=True)
            if len(self._preloaded) == 1:
                for name in PRELOAD_LOOKUPS:
                    lookup_loader.get(name, class_only=True)
        except Exception:  # pylint: disable=broad-except
            # only a warm-up: the worker loads it itself
            pass

    def v2_runner_on_ok(self, result):
        if result._task and result._task.get_name() == SUMMARY_TASK:
            self.summary_ran = True

    def _record(self, result, msg):
        host = result._host.get_name()
        task = result._task.get_name() if result._task else "?"
        # the last failure is the one that took the host out (an earlier one may have been rescued)
        self.failures[host] = {"task": to_text(task), "msg": msg}
        if self._variable_manager is not None:
            self._variable_manager.set_host_variable(host, "gpufleet_failure", dict(self.failures[host]))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._record(result, failure_message(result._result))

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable: " + failure_message(result._result))

    def v2_playbook_on_stats(self, stats):
        failed = sorted(h for h in self.failures if stats.failures.get(h) or stats.dark.get(h))
        if self.summary_ran or not failed:
            return
        self._display.display("gpufleet summary: the run stopped before its summary; FAILED %d node(s):" % len(failed))
        for host in failed:
            self._display.display("FAILED       %s: task %r: %s" % (host, self.failures[host]["task"], self.failures[host]["msg"]))
