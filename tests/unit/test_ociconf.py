"""oci.conf as Slurm reads it (oci.conf(5)), and its OCI patterns."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral.confsyntax import ConfigError
from corral.ociconf import OciConf, Pattern, expand, load, parse, quote_args

RUN = 'RunTimeRun="runc --root /run/user/%U/ run --bundle %b %n.%u.%j.%s.%t"\n'


def test_keys_are_read_in_any_case_with_slurms_values() -> None:
    conf = parse(
        RUN
        + "envexclude=^SLURM_CONF=\nRunTimeEnvExclude=^SECRET\nCreateEnvFile=true\n"
        + "IgnoreFileConfigJson=yes\nMountSpoolDir=/slurm\nDisableHooks=prestart,poststop\n",
        "oci.conf",
    )
    assert conf.run == "runc --root /run/user/%U/ run --bundle %b %n.%u.%j.%s.%t"
    assert conf.env_exclude == "^SLURM_CONF=" and conf.runtime_env_exclude == "^SECRET"
    assert conf.env_file == "null"  # true is null's older name
    assert conf.ignore_config_json and conf.mount_spool_dir == "/slurm"
    assert conf.disable_hooks == ("prestart", "poststop")
    assert OciConf.from_dict(conf.to_dict()) == conf


def test_an_unknown_key_is_refused_with_its_file_and_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse(RUN + "RunTimeRnu=runc\n", "/etc/slurm/oci.conf")
    assert str(caught.value) == "/etc/slurm/oci.conf:2: unknown key 'RunTimeRnu' in oci.conf"


_HOOKS = "createRuntime, createContainer, startContainer, poststart, poststop"
_REFUSED = "is not supported: "


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            RUN + 'RunTimeStart="runc start %n"\n',
            "oci.conf:2: RunTimeRun and RunTimeStart are mutually exclusive",
        ),
        (
            "RunTimeCreate=a\nRunTimeStart=b\nRunTimeQuery=c\n",
            "oci.conf: RunTimeRun is not set, so RunTimeKill, RunTimeDelete must be",
        ),
        (
            RUN + "CreateEnvFile=maybe\n",
            "oci.conf:2: bad CreateEnvFile value 'maybe': use null, newline or disabled",
        ),
        (
            RUN + "MountSpoolDir=spool\n",
            "oci.conf:2: bad MountSpoolDir value 'spool': not an absolute path",
        ),
        (
            RUN + "DisableHooks=prestart,later\n",
            f"oci.conf:2: bad DisableHooks value 'later': use prestart, {_HOOKS}",
        ),
        (
            RUN + "ContainerPath=/var/oci/%j\n",
            f"oci.conf:2: ContainerPath=/var/oci/%j {_REFUSED}bundles are written in the run's",
        ),
        (
            RUN + "DisableCleanup=yes\n",
            f"oci.conf:2: DisableCleanup=yes {_REFUSED}the bundles go with the run's spool",
        ),
    ],
)
def test_what_cannot_be_done_is_refused_in_words(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text, "oci.conf")
    assert str(caught.value).startswith(message)


def test_a_bad_regex_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"oci.conf:2: bad EnvExclude value '\(': "):
        parse(RUN + "EnvExclude=(\n", "oci.conf")


def test_logging_keys_are_warned_about_and_the_create_start_set_is_enough(tmp_path: Path) -> None:
    conf = parse(
        'RunTimeCreate="c %b"\nRunTimeStart=s\nRunTimeQuery=q\nRunTimeKill=k\nRunTimeDelete=d\n'
        "DebugFlags=debug\n",
        "oci.conf",
    )
    assert (conf.create, conf.run) == ("c %b", "")
    assert conf.warnings == (
        "oci.conf:6: DebugFlags has no effect: the agent logs at its own level",
    )
    assert load(str(tmp_path / "oci.conf")) is None  # no file: containers are off


VALUES = Pattern(
    bundle="/spool/job1/oci/task_0",
    env_file="/spool/job1/oci/task_0/environment",
    job_id=12,
    spool="/spool/job1/oci",
    node="node1",
    pid=4242,
    rootfs="/images/alpine/rootfs",
    step="4294967291",
    task=0,
    uid=1000,
    user="alice",
    args=("/bin/echo", "it's", "a b"),
)


def test_every_pattern_letter_is_replaced() -> None:
    assert expand("%n.%u.%j.%s.%t %b %e %m %p %r %U 100%% %x", VALUES) == (
        "node1.alice.12.4294967291.0 /spool/job1/oci/task_0 /spool/job1/oci/task_0/environment "
        "/spool/job1/oci 4242 /images/alpine/rootfs 1000 100% %x"
    )


def test_args_are_quoted_so_that_a_shell_reads_them_back() -> None:
    out = subprocess.run(
        ["/bin/sh", "-c", f"printf '%s|' {expand('%@', VALUES)}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "/bin/echo|it's|a b|"
    assert quote_args(["a"]) == "'a'"
