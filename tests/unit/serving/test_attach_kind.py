"""The attach kind: an attached endpoint is never launched, signalled or stopped; every other profile goes to the
host's own kind (here a recording stand-in), which alone is ever asked to stop, and whose lock is the only lock."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import AttachConfig
from mtp_remote.errors import LaunchError
from mtp_remote.serving.attach import AttachedRecord, AttachServer
from mtp_remote.serving.base import Capabilities
from tests.support.ports import free_port

HOST = HostConfig(name="box", transport="local", engine="sim")


@dataclass
class Inner:
    """The host's own kind, recording what it is asked."""

    calls: list = field(default_factory=list)
    workdir: str = "/wd"
    capabilities: Capabilities = Capabilities(kind="process", identity="pid", drain=True, gpu_release="pid",
                                              logs="stream", relaunch=True, launch=True, lock=True,
                                              host_view=True)

    def prepare(self, lock_owner=None):
        self.calls.append(("prepare", lock_owner))

    def launch(self, profile, argv, env):
        self.calls.append(("launch", profile))
        return f"rec-{profile}"

    def stop(self, **kw):
        self.calls.append(("stop", kw.get("unlock")))
        return "stopped"


def _rec(profile="prod") -> AttachedRecord:
    return AttachedRecord(profile=profile, run_id="r", where="http://127.0.0.1:1", url="http://127.0.0.1:1", port=0,
                          argv_masked=[], speculative=True, model=None)


def test_only_the_inner_kind_is_ever_stopped_and_it_alone_holds_the_lock():
    inner = Inner()
    kind = AttachServer(None, HOST, {"prod": AttachConfig(url="http://127.0.0.1:1")}, run_id="r", inner=inner)
    assert kind.capabilities.lock and not kind.capabilities.relaunch and kind.capabilities.identity == "none"
    kind.prepare(lock_owner="me@here")
    assert kind.launch("baseline", ["--tp-size", "2"], {}) == "rec-baseline"
    assert kind.stop() == "stopped"  # the launched baseline: stopped by its own kind
    kind._current = _rec()  # as launch leaves it for an attached profile
    res = kind.stop()
    assert res.found == "attached" and res.describe().startswith("not stopped: http://127.0.0.1:1 is an attached")
    assert kind.stop(unlock=True) == "stopped"  # the run's end: the inner kind's leftovers and its lock
    assert inner.calls == [("prepare", "me@here"), ("launch", "baseline"), ("stop", False), ("stop", True)]
    assert kind.poll(_rec(), 0) == (True, "", 0) and kind.follow(_rec()) is None and kind.read_log("") == ""


def test_every_profile_attached_means_no_lock_and_nothing_to_stop():
    kind = AttachServer(None, HOST, {"a": AttachConfig(url="http://127.0.0.1:1")}, run_id="r")
    assert not kind.capabilities.lock
    kind.prepare(lock_owner="me@here")
    assert kind.stop(unlock=True).found == "attached" and kind.find_leftover() is None
    with pytest.raises(LaunchError, match="neither attached nor launchable"):
        kind.launch("b", [], {})


def test_an_attached_endpoint_that_does_not_answer_is_a_launch_error_naming_it():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    kind = AttachServer(None, HOST, {"prod": AttachConfig(url=url)}, run_id="r")
    with pytest.raises(LaunchError) as e:
        kind.launch("prod", [], {})
    assert e.value.cause == "attach_unreachable" and url in str(e.value)


def test_a_runner_without_the_attach_kind_never_launches_an_attached_profile(tmp_path):
    from mtp_remote.config.playbook import Playbook
    from mtp_remote.errors import ConfigError
    from mtp_remote.experiment.runner import Runner

    pb = Playbook.model_validate({"name": "p", "profiles": {"baseline": {}, "prod": {"attach": {"port": 30000}}},
                                  "prompts": [{"id": "a", "text": "x"}]})
    with pytest.raises(ConfigError, match=r"profiles \['prod'\] are attached endpoints: this command launches"):
        Runner(HOST, pb, tmp_path / "run", run_id="r", python="python3").run()
    assert not (tmp_path / "run").exists()  # refused before anything: no run directory, no connection


def test_the_launch_command_refuses_an_attached_profile_before_any_command_runs():
    from invoke import MockContext

    from mtp_remote.config.playbook import Playbook
    from mtp_remote.errors import MtpRemoteError
    from mtp_remote.host.ops import launch

    pb = Playbook.model_validate({"name": "p", "profiles": {"baseline": {}, "prod": {"attach": {"port": 30000}}},
                                  "prompts": [{"id": "a", "text": "x"}]})
    with pytest.raises(MtpRemoteError, match=r"'prod' is an attached endpoint \(host port 30000\): it is never "
                                             r"launched"):
        launch(MockContext(), HOST, pb, "prod", "python3", run_id="r")  # MockContext: any command would raise
