"""The failures callback: the message it records for the summary, and that it records per host."""
from ansible_collections.gpufleet.provision.plugins.callback import failures


class FakeVars:
    def __init__(self):
        self.hostvars = {}

    def set_host_variable(self, host, name, value):
        self.hostvars.setdefault(host, {})[name] = value


class Named:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class Result:
    def __init__(self, host, task, result):
        self._host, self._task, self._result = Named(host), Named(task), result


class Stats:
    def __init__(self, failures=None, dark=None):
        self.failures, self.dark = failures or {}, dark or {}


def test_message_is_the_module_msg_in_one_line():
    assert failures.failure_message({"msg": "BMC 10.0.0.5:\n  401 Unauthorized"}) == "BMC 10.0.0.5: 401 Unauthorized"
    assert failures.failure_message({"rc": 2, "stderr": "no such file"}) == "no such file"
    assert failures.failure_message({"censored": "the output has been hidden"}) == "output hidden (no_log)"
    assert failures.failure_message({"results": [{"failed": False}, {"failed": True, "msg": "item 2 broke"}]}) == "item 2 broke"
    assert failures.failure_message({}) == "failed without a message"
    assert len(failures.failure_message({"msg": "x" * 1000})) == failures.MSG_WIDTH


def test_records_the_last_failure_of_each_host_as_a_host_variable(capsys):
    cb = failures.CallbackModule()
    cb._variable_manager = FakeVars()
    cb.v2_runner_on_failed(Result("gpu001", "first", {"msg": "rescued later"}))
    cb.v2_runner_on_failed(Result("gpu001", "bios : Apply", {"msg": "401"}))
    cb.v2_runner_on_failed(Result("gpu002", "ignored", {"msg": "x"}), ignore_errors=True)
    cb.v2_runner_on_unreachable(Result("gpu003", "Collect installed packages", {"msg": "ssh: connect refused"}))
    assert cb._variable_manager.hostvars == {
        "gpu001": {"gpufleet_failure": {"task": "bios : Apply", "msg": "401"}},
        "gpu003": {"gpufleet_failure": {"task": "Collect installed packages", "msg": "unreachable: ssh: connect refused"}},
    }
    # the run stopped before the summary play: the callback names the failed nodes itself
    cb.v2_playbook_on_stats(Stats(failures={"gpu001": 1}, dark={"gpu003": 1}))
    out = capsys.readouterr().out
    assert "FAILED 2 node(s)" in out and "gpu001: task 'bios : Apply': 401" in out


def test_quiet_when_the_summary_ran(capsys):
    cb = failures.CallbackModule()
    cb.v2_runner_on_failed(Result("gpu001", "x", {"msg": "y"}))
    cb.v2_runner_on_ok(Result("gpu002", failures.SUMMARY_TASK, {}))
    cb.v2_playbook_on_stats(Stats(failures={"gpu001": 1}))
    assert "gpufleet summary" not in capsys.readouterr().out


class Task:
    def __init__(self, action):
        self.action = action


class Loader:
    def __init__(self, fail=False):
        self.calls, self.fail = [], fail

    def get(self, name, class_only=False):
        self.calls.append((name, class_only))
        if self.fail:
            raise ValueError("cannot load %s" % name)


def test_the_collections_action_plugins_are_loaded_once_before_their_workers_fork(monkeypatch):
    actions, lookups = Loader(), Loader()
    monkeypatch.setattr(failures, "action_loader", actions)
    monkeypatch.setattr(failures, "lookup_loader", lookups)
    cb = failures.CallbackModule()
    for action in ("ansible.builtin.debug", "gpufleet.provision.validate_node", "assert",
                   "gpufleet.provision.validate_node", "gpufleet.provision.node_facts", None):
        cb.v2_playbook_on_task_start(Task(action), False)
    assert actions.calls == [("gpufleet.provision.validate_node", True), ("gpufleet.provision.node_facts", True)]
    assert lookups.calls == [("gpufleet.provision.profile", True)]


def test_a_plugin_that_cannot_be_loaded_is_left_to_its_task(monkeypatch):
    monkeypatch.setattr(failures, "action_loader", Loader(fail=True))
    monkeypatch.setattr(failures, "lookup_loader", Loader())
    failures.CallbackModule().v2_playbook_on_task_start(Task("gpufleet.provision.broken"), False)
