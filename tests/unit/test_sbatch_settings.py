"""cli.sbatch.settings: option values checked with Slurm's messages, and precedence."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.failure import Failure
from cli.sbatch.settings import CLI, ENV, SCRIPT, Settings, node_count, signal_spec


def fields_of(key: str, text: str | None) -> dict[str, Any]:
    settings = Settings()
    settings.apply(key, text, CLI)
    return settings.fields


def failure_of(key: str, text: str | None) -> Failure:
    with pytest.raises(Failure) as info:
        fields_of(key, text)
    return info.value


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        pytest.param("time", "10", {"time_limit": 10}, id="time-minutes"),
        pytest.param("time", "00:30:00", {"time_limit": 30}, id="time-hms"),
        pytest.param("time", "1-0", {"time_limit": 1440}, id="time-days"),
        pytest.param("time", "1:01", {"time_limit": 2}, id="time-seconds-round-up"),
        pytest.param("time", "UNLIMITED", {"time_limit": -1}, id="time-unlimited"),
        pytest.param("time", "0", {"time_limit": -1}, id="time-zero-is-unlimited"),
        pytest.param("time-min", "5", {"time_min": 5}, id="time-min"),
        pytest.param("mem", "1GB", {"mem_per_node": 1024}, id="mem"),
        pytest.param("mem", "0", {"mem_per_node": 0}, id="mem-all"),
        pytest.param("mem-per-cpu", "500k", {"mem_per_cpu": 1}, id="mem-per-cpu"),
        pytest.param("nodes", "2", {"min_nodes": 2, "max_nodes": 2}, id="nodes"),
        pytest.param("nodes", "2-4", {"min_nodes": 2, "max_nodes": 4}, id="nodes-range"),
        pytest.param("nodes", "-3", {"min_nodes": 1, "max_nodes": 3}, id="nodes-no-minimum"),
        pytest.param("nodes", "1k", {"min_nodes": 1024, "max_nodes": 1024}, id="nodes-k"),
        pytest.param("nodes", "1-15:4", {"min_nodes": 1, "max_nodes": 13}, id="nodes-size-list"),
        pytest.param("nodes", "4,2", {"min_nodes": 2, "max_nodes": 4}, id="nodes-list"),
        pytest.param("ntasks", "4", {"num_tasks": 4}, id="ntasks"),
        pytest.param("cpus-per-task", "+2", {"cpus_per_task": 2}, id="cpus-signed"),
        pytest.param("partition", "a,b,", {"partitions": ["a", "b"]}, id="partitions"),
        pytest.param("output", "NONE", {"std_out": "/dev/null"}, id="output-none"),
        pytest.param("error", "e-%j.txt", {"std_err": "e-%j.txt"}, id="error"),
        pytest.param("input", "none", {"std_in": "/dev/null"}, id="input-none"),
        pytest.param("nice", None, {"nice": 100}, id="nice-default"),
        pytest.param("nice", "-5", {"nice": -5}, id="nice-negative"),
        pytest.param("nice", "abc", {"nice": 0}, id="nice-like-strtol"),
        pytest.param("priority", "TOP", {"priority": 4294967293}, id="priority-top"),
        pytest.param("priority", "7", {"priority": 7}, id="priority"),
        pytest.param("exclusive", None, {"exclusive": True}, id="exclusive"),
        pytest.param("exclusive", "oversubscribe", {"exclusive": False}, id="exclusive-over"),
        pytest.param("oversubscribe", None, {"oversubscribe": True}, id="oversubscribe"),
        pytest.param("open-mode", "append", {"open_mode": "append"}, id="append"),
        pytest.param("open-mode", "T", {"open_mode": "truncate"}, id="truncate"),
        pytest.param("kill-on-invalid-dep", "YES", {"kill_on_invalid_dep": True}, id="kill"),
        pytest.param("requeue", None, {"requeue": True}, id="requeue"),
        pytest.param("no-requeue", None, {"requeue": False}, id="no-requeue"),
        pytest.param("gres", "none", {"gres": ""}, id="gres-none"),
        pytest.param("mail-type", "end,Fail", {"mail_type": "END,FAIL"}, id="mail-type"),
        pytest.param("mail-type", "ALL,NONE,BEGIN", {"mail_type": "BEGIN"}, id="mail-none"),
        pytest.param("mail-type", "ALL",
                     {"mail_type": "INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT"},
                     id="mail-all"),
        pytest.param("mail-user", "a@b", {"mail_user": "a@b"}, id="mail-user"),
        pytest.param("comment", "c", {"comment": "c"}, id="plain-option"),
        pytest.param(
            "signal", "B:USR2@30",
            {"signal_num": 12, "signal_time": 30, "signal_batch_only": True}, id="signal",
        ),
    ],
)  # fmt: skip
def test_values(key: str, text: str | None, expected: dict[str, Any]) -> None:
    assert fields_of(key, text) == expected


@pytest.mark.parametrize(
    ("key", "text", "line", "status"),
    [
        pytest.param("time", "abc", "Invalid --time specification", 255, id="time"),
        pytest.param("time-min", "1:2:3:4", "Invalid --time-min specification", 255,
                     id="time-min"),
        pytest.param("mem", "1X", "Invalid --mem specification", 255, id="mem"),
        pytest.param("mail-type", "END,SOON", "Invalid --mail-type specification", 255,
                     id="mail-type"),
        pytest.param("mem-per-cpu", "-1", "Invalid --mem-per-cpu specification", 255,
                     id="mem-per-cpu"),
        pytest.param("ntasks", "abc", 'Invalid numeric value "abc" for --ntasks.', 1,
                     id="ntasks-word"),
        pytest.param("ntasks", "0", 'Invalid numeric value "0" for --ntasks.', 1, id="ntasks-0"),
        pytest.param("cpus-per-task", "2147483647",
                     "Numeric argument (2147483647) too large for --cpus-per-task.", 1,
                     id="too-large"),
        pytest.param("nodes", "x", '"x" is not a valid node count', 255, id="nodes-word"),
        pytest.param("nodes", "4-2", "Maximum node count 2 is less than minimum node count 4",
                     255, id="nodes-reversed"),
        pytest.param("nodes", "2-", "Maximum node count -1 is less than minimum node count 2",
                     255, id="nodes-open-ended"),
        pytest.param("nodes", "1-3:0", '"1-3:0" is not a valid node count', 255,
                     id="nodes-zero-step"),
        pytest.param("nice", "2147483646",
                     "Invalid --nice value, out of range (+/- 2147483645)", 255, id="nice"),
        pytest.param("priority", "-1", "Priority must be >= 0", 255, id="priority"),
        pytest.param("exclusive", "maybe", "Invalid --exclusive specification", 255,
                     id="exclusive"),
        pytest.param("exclusive", "user",
                     "--exclusive=user is not supported: only whole nodes are", 255,
                     id="exclusive-user"),
        pytest.param("open-mode", "x", "Invalid --open-mode specification", 255, id="open-mode"),
        pytest.param("kill-on-invalid-dep", "1", "Invalid --kill-on-invalid-dep specification",
                     255, id="kill"),
        pytest.param("signal", "FOO", "Invalid --signal specification", 255, id="signal"),
        pytest.param("begin", "whenever", "Invalid --begin specification", 255, id="begin"),
        pytest.param("deadline", "soon", "Invalid --deadline specification", 255,
                     id="deadline"),
    ],
)  # fmt: skip
def test_bad_values(key: str, text: str, line: str, status: int) -> None:
    failure = failure_of(key, text)
    assert (failure.lines, failure.status) == ((line,), status)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("USR1", (10, 60, False), id="name"),
        pytest.param("sigusr1", (10, 60, False), id="sig-prefix-any-case"),
        pytest.param("10@90", (10, 90, False), id="number"),
        pytest.param("B:TERM@0", (15, 0, True), id="batch"),
        pytest.param("BTERM", (15, 60, True), id="batch-no-colon"),
        pytest.param("R:USR2", (12, 60, False), id="reservation-flag"),
        pytest.param("RB:USR2@5", (12, 5, True), id="both-flags"),
    ],
)
def test_signal(text: str, expected: tuple[int, int, bool]) -> None:
    assert signal_spec(text) == expected


@pytest.mark.parametrize("text", ["", "0", "USR1@", "USR1@x", "USR1@65536", "65536", "B:"])
def test_bad_signal(text: str) -> None:
    with pytest.raises(Failure):
        signal_spec(text)


def test_begin_is_a_timestamp() -> None:
    begin = fields_of("begin", "now+1hour")["begin_time"]
    later = fields_of("deadline", "now+2hours")["deadline"]
    assert later - begin == 3600


def test_later_sources_win_and_resets_forget() -> None:
    settings = Settings()
    settings.apply("job-name", "script", SCRIPT)
    settings.apply("time", "5", SCRIPT)
    settings.apply_environment({"SBATCH_JOB_NAME": "env", "SBATCH_NO_REQUEUE": "1"})
    settings.apply("job-name", "cli", CLI)
    assert settings.fields == {"name": "cli", "time_limit": 5, "requeue": False}
    assert settings.sources == {"job-name": CLI, "time": SCRIPT, "no-requeue": ENV}


@pytest.mark.parametrize(
    ("value", "is_set"),
    [("", True), ("yes", True), ("YES", True), ("1", True), ("-3", True), ("0", False),
     ("no", False), ("true", False)],
)  # fmt: skip
def test_environment_flags(value: str, is_set: bool) -> None:
    settings = Settings()
    settings.apply("wait", None, SCRIPT)
    settings.apply_environment({"SBATCH_WAIT": value})
    assert settings.fields.get("wait", False) is is_set


def test_environment_optional_argument() -> None:
    settings = Settings()
    settings.apply_environment({"SBATCH_EXCLUSIVE": ""})
    assert settings.fields == {"exclusive": True}


@pytest.mark.parametrize(
    ("mem", "mem_per_cpu", "kept"),
    [
        pytest.param(CLI, ENV, {"mem_per_node": 1024}, id="cli-mem-drops-env-per-cpu"),
        pytest.param(ENV, SCRIPT, {"mem_per_cpu": 2048}, id="script-per-cpu-drops-env-mem"),
    ],
)
def test_memory_options_override_environment(mem: str, mem_per_cpu: str, kept: Any) -> None:
    settings = Settings()
    settings.apply("mem", "1G", mem)
    settings.apply("mem-per-cpu", "2G", mem_per_cpu)
    settings.verify()
    assert settings.fields == kept


@pytest.mark.parametrize(
    ("mem", "mem_per_cpu", "line"),
    [
        pytest.param(SCRIPT, CLI, "--mem, --mem-per-cpu, and --mem-per-gpu are mutually "
                     "exclusive.", id="both-typed"),
        pytest.param(ENV, ENV, "SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE "
                     "are mutually exclusive.", id="both-environment"),
    ],
)  # fmt: skip
def test_memory_options_conflict(mem: str, mem_per_cpu: str, line: str) -> None:
    settings = Settings()
    settings.apply("mem", "1G", mem)
    settings.apply("mem-per-cpu", "2G", mem_per_cpu)
    with pytest.raises(Failure) as info:
        settings.verify()
    assert (info.value.lines, info.value.level, info.value.status) == ((line,), "fatal", 1)


def test_exclusive_and_oversubscribe_conflict() -> None:
    settings = Settings()
    settings.apply("exclusive", None, CLI)
    settings.apply("oversubscribe", None, SCRIPT)
    with pytest.raises(Failure):
        settings.verify()


def test_deadline_before_begin() -> None:
    settings = Settings()
    settings.apply("begin", "now+2hours", CLI)
    settings.apply("deadline", "now+1hour", CLI)
    with pytest.raises(Failure) as info:
        settings.verify()
    assert info.value.lines == ("Incompatible begin and deadline time specification",)


@given(st.text(max_size=30))
def test_node_count_raises_only_failure(text: str) -> None:
    try:
        low, high = node_count(text)
    except Failure:
        return
    assert low >= 0 and (high == 0 or low <= high)


@given(st.sampled_from(["nodes", "ntasks", "nice", "priority", "signal", "mem", "array"]),
       st.text(max_size=40))  # fmt: skip
def test_setters_raise_only_failure(key: str, text: str) -> None:
    with contextlib.suppress(Failure):
        fields_of(key, text)


def test_get_user_env_is_refused_for_root_whose_login_environment_slurm_would_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert failure_of("get-user-env", "10L").lines == (
        "--get-user-env is not supported: the login environment is not loaded",
    )
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert [fields_of("get-user-env", v) for v in (None, "10", "S", "60l")] == [
        {"get_user_env": True}
    ] * 4
    assert failure_of("get-user-env", "soon").lines == ("Invalid --get-user-env specification",)


def test_signal_reservation_flag_is_said_to_have_no_effect(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fields_of("signal", "R:USR2@30")["signal_num"] == 12
    assert "--signal=R: has no effect" in capsys.readouterr().err
    fields_of("signal", "B:USR2")
    assert capsys.readouterr().err == ""


def test_nodefile_names_the_hosts_as_nodelist_would(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("n1 n2\n# a comment\nn3  # the last\n\n")
    assert fields_of("nodefile", str(hosts)) == {"req_nodes": "n1,n2,n3"}


def test_nodefile_missing_or_empty_is_refused_in_slurms_words(tmp_path: Path) -> None:
    missing = str(tmp_path / "none")
    failure = failure_of("nodefile", missing)
    assert failure.lines == (
        f"slurm_allocate_resources error opening file {missing}, No such file or directory",
        "Invalid --nodefile node file",
    )
    assert failure.status == 255
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    failure = failure_of("nodefile", str(empty))
    assert failure.lines == ("Hostlist is empty!", "Invalid --nodefile node file")
