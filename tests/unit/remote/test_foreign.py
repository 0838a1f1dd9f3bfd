"""Foreign SGLang processes: servers, children, orphans and other GPU users outside our process group."""

from __future__ import annotations

from mtp_remote.remote.facts import GpuApp, PsEntry
from mtp_remote.remote.foreign import brief_command, find_foreign

PS = [
    PsEntry(1, 0, 1, "root", 9000, "/sbin/init"),
    PsEntry(500, 1, 500, "ops", 100, "python -m sglang.launch_server --port 30000"),   # ours
    PsEntry(510, 500, 500, "ops", 99, "sglang::scheduler_TP0"),                         # ours
    PsEntry(700, 1, 700, "bob", 5000, "python3 -m sglang.launch_server --port 31000"),  # foreign server
    PsEntry(710, 700, 700, "bob", 4999, "sglang::scheduler_TP0"),                       # its child
    PsEntry(800, 1, 650, "ops", 7000, "sglang::scheduler_TP1"),                         # orphan
    PsEntry(900, 1, 900, "ops", 10, "vim notes-about-sglang.txt"),                     # not SGLang
    PsEntry(950, 1, 950, "ops", 10, "[python3] <defunct>"),                             # zombie
]
APPS = [GpuApp(510, 40000), GpuApp(710, 30000), GpuApp(800, 20000), GpuApp(1234, 1000)]


def test_our_group_is_never_listed_and_the_rest_is_classified():
    found = {f.pid: f for f in find_foreign(PS, APPS, our_pgid=500)}
    assert set(found) == {700, 710, 800, 1234}
    assert found[700].kind == "server" and found[700].user == "bob"
    assert found[710].kind == "child" and found[710].gpu_mib == 30000
    assert found[800].kind == "orphan" and found[800].gpu_mib == 20000
    assert found[1234].kind == "gpu-app" and found[1234].args == "(not visible to ps)"


def test_without_a_recorded_server_our_old_processes_count_as_foreign():
    pids = {f.pid for f in find_foreign(PS, [], our_pgid=None)}
    assert pids == {500, 510, 700, 710, 800}


def test_a_description_names_pid_user_age_and_memory():
    f = next(f for f in find_foreign(PS, APPS, our_pgid=500) if f.pid == 800)
    assert f.describe() == "PID 800 (orphan, user ops, 7000 s old, 20000 MiB GPU): sglang::scheduler_TP1"


def test_force_targets_only_what_holds_this_hosts_gpus_or_port():
    from mtp_remote.remote.facts import parse_port_owners
    from mtp_remote.remote.foreign import force_targets

    owners = parse_port_owners('LISTEN 0 2048 127.0.0.1:30000 0.0.0.0:* users:(("python3",pid=900,fd=3))\n')
    assert owners == {900}
    found = find_foreign(PS, [GpuApp(800, 20000)], our_pgid=500, port_owners=owners)
    kinds = {f.pid: f.kind for f in found}
    assert kinds[900] == "port-owner" and kinds[800] == "orphan"
    # 700 (bob's server on port 31000, no memory on our GPUs) is listed but not a target
    assert [f.pid for f in force_targets(found, 30000)] == [800, 900]


def test_force_matches_the_port_exactly_and_only_this_hosts_gpus():
    from mtp_remote.remote.facts import GpuInfo, apps_on_gpus
    from mtp_remote.remote.foreign import force_targets

    ps = [PsEntry(11, 1, 11, "u", 1, "python -m sglang.launch_server --port 302110"),
          PsEntry(12, 1, 12, "u", 1, "python -m sglang.launch_server --port=30211"),
          PsEntry(13, 1, 13, "u", 1, "python -m sglang.launch_server --dist-init-addr 127.0.0.1:30211"),
          PsEntry(14, 1, 14, "u", 1, "python train.py")]
    gpus = [GpuInfo(0, "A6000", 0, 49140, "GPU-0"), GpuInfo(1, "A6000", 20000, 49140, "GPU-1")]
    apps = apps_on_gpus([GpuApp(14, 20000, "GPU-1")], gpus, [0])  # the host uses GPU 0 only
    assert apps == []
    targets = force_targets(find_foreign(ps, apps, our_pgid=None), 30211)
    assert [f.pid for f in targets] == [12]


def test_a_grep_or_a_viewer_titled_like_a_server_is_not_a_server():
    ps = [PsEntry(900, 1, 900, "ops", 5, "grep sglang.launch_server", ("grep", "sglang.launch_server")),
          PsEntry(901, 1, 901, "ops", 5, "less python -m sglang.launch_server.log",
                  ("less", "python -m sglang.launch_server.log")),
          PsEntry(902, 1, 902, "ops", 5, "python -m sglang.launch_server --port 1",
                  ("python -m sglang.launch_server --port 1",)),  # one word: a title, not an argv
          PsEntry(903, 1, 903, "bob", 5, "/opt/py/bin/python3.11 -u -m sglang.launch_server",
                  ("/opt/py/bin/python3.11", "-u", "-m", "sglang.launch_server"))]
    assert [f.pid for f in find_foreign(ps, [])] == [903]


def test_our_own_orphaned_scheduler_is_not_called_foreign():
    ps = [PsEntry(800, 1, 650, "ops", 70, "sglang::scheduler_TP1", ("sglang::scheduler_TP1",), 4242),
          PsEntry(801, 1, 651, "ops", 70, "sglang::scheduler_TP0", ("sglang::scheduler_TP0",), 9999)]
    found = find_foreign(ps, [], our_pgid=500, our_children=[[800, 4242], [801, 1111]])
    assert [f.pid for f in found] == [801], "801 has another start time: a reused PID, so not ours"


def test_a_launch_report_whose_group_is_not_led_by_the_pid_is_refused():
    import pytest

    from mtp_remote.remote.hostscripts import parse_launch

    with pytest.raises(ValueError, match="not a group leader"):
        parse_launch("pid 4711\nident 4711 300 1 b s\nresult ok\n")


REAL_CPU_LINE = ("/root/.cache/mtp-remote/sglang-0.5.9-cpu-v2/venv/bin/python -m sglang.launch_server --model-path "
                 "/root/.cache/mtp-remote/sglang-0.5.9-cpu-v2/model --device cpu --max-total-tokens 8192 "
                 "--attention-backend triton --dtype float32 --speculative-algorithm STANDALONE "
                 "--speculative-draft-model-path /root/.cache/mtp-remote/sglang-0.5.9-cpu-v2/model "
                 "--host 127.0.0.1 --port 30021")


def test_a_long_command_line_is_shortened_by_whole_arguments_and_keeps_model_and_port():
    short = brief_command(REAL_CPU_LINE)
    assert short.endswith("--host 127.0.0.1 --port 30021 (+10 more arguments)")
    assert "--model-path /root/.cache/mtp-remote/sglang-0.5.9-cpu-v2/model " in short
    words = set(REAL_CPU_LINE.split(" ")) | {"…", "(+10", "more", "arguments)"}
    assert set(short.split(" ")) <= words, "no argument is cut inside"
    assert brief_command("python -m sglang.launch_server --port 30000") == "python -m sglang.launch_server --port 30000"


def test_a_flag_is_shown_with_its_value_or_not_at_all():
    line = "python3 -m sglang.launch_server " + "--chunked-prefill-size 8192 " * 20 + "--port=31000"
    short = brief_command(line, limit=120)
    assert "--port=31000" in short
    words = short.split(" ")
    for i, w in enumerate(words):
        if w == "--chunked-prefill-size":
            assert words[i + 1] == "8192"


def test_sglang_serve_is_a_server_in_every_form_proc_shows_it_and_its_other_subcommands_are_not():
    from mtp_remote.remote.foreign import server_kind

    assert server_kind(("/opt/sg/bin/python3", "/opt/sg/bin/sglang", "serve", "--model-path", "/m")) == "server"
    assert server_kind(("sglang", "serve", "--port", "30000")) == "server"
    assert server_kind(("python", "-m", "mtp_remote.sim", "serve")) == "server"  # the sim's `sglang serve`
    assert server_kind(("/opt/sg/bin/python3", "/opt/sg/bin/sglang", "generate")) is None
    assert server_kind(("python", "-m", "mtp_remote.sim", "bench")) is None
    assert server_kind(("vim", "sglang", "serve")) is None


def test_a_foreign_sglang_serve_is_listed_with_its_gpu_memory():
    ps = [PsEntry(700, 1, 700, "bob", 50, "/opt/sg/bin/python3 /opt/sg/bin/sglang serve --port 31000",
                  ("/opt/sg/bin/python3", "/opt/sg/bin/sglang", "serve", "--port", "31000"))]
    found = find_foreign(ps, [GpuApp(700, 30000)])
    assert [(f.pid, f.kind, f.gpu_mib) for f in found] == [(700, "server", 30000)]


def test_gpu_memory_no_visible_process_holds_is_named_per_gpu():
    from mtp_remote.remote.facts import GpuInfo
    from mtp_remote.remote.foreign import describe_unseen, unseen_gpu_memory

    gpus = [GpuInfo(0, "A6000", 41000, 49140, "GPU-a"), GpuInfo(1, "A6000", 300, 49140, "GPU-b")]
    apps = [GpuApp(500, 1000, "GPU-a"), GpuApp(4194804, 40000, "GPU-a"), GpuApp(501, 200, "GPU-b")]
    unseen = unseen_gpu_memory(gpus, apps, visible={500, 501})
    assert unseen == [{"index": 0, "mib": 40000}]  # GPU 1's 100 MiB unexplained is within the tolerance
    assert describe_unseen(unseen) == ["40000 MiB held on GPU 0 by processes this host cannot see"]
    assert unseen_gpu_memory(gpus, apps, visible={500, 501}, indices=[1]) == []
