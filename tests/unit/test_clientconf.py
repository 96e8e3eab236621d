"""The client's slurm.conf reader agrees with the daemons' model, and the shared tokenizer
agrees with the regular-expression grammar it replaced."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral import confsyntax
from corral.clientconf import ClientSettings, client_settings
from corral.config import ConfigError, SlurmConfig, load

HEAD = "ClusterName=test\nSlurmctldHost=ctl\n"


def _write(tmp_path: Path, text: str, name: str = "slurm.conf") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _same(client: ClientSettings, full: SlurmConfig) -> None:
    assert client.path == full.path
    assert client.cluster_name == full.cluster_name
    assert client.controller_hosts == full.slurmctld_hosts
    assert client.controller_host == full.controller_host
    assert client.state_save_location == full.state_save_location
    assert client.slurmctld_port == full.slurmctld_port
    assert client.slurmd_port == full.slurmd_port
    assert client.max_array_size == full.max_array_size
    assert client.kill_on_bad_exit == full.kill_on_bad_exit
    assert (client.mpi_default or "none") == full.mpi_default
    assert client.bcast == full.bcast
    assert client.bcast_exclude == full.bcast_exclude


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(HEAD, id="defaults"),
        pytest.param(
            "ClusterName=Big\nSlurmctldHost=a(10.0.0.1)\nSlurmctldHost=b\n"
            "StateSaveLocation=/srv/state\nSlurmctldPort=7000-7003\nSlurmdPort=7010\n"
            "MaxArraySize=4k\nKillOnBadExit=1\nMpiDefault=pmi2\n",
            id="values",
        ),
        pytest.param(
            "clustername=x\nSLURMCTLDHOST=h\nstatesavelocation = /s\n", id="any-case-and-spaces"
        ),
        pytest.param(
            'ClusterName=x SlurmctldHost=h StateSaveLocation="/a b" # comment\n', id="quoted"
        ),
        pytest.param(
            "ClusterName=x\nSlurmctldHost=h \\\n  StateSaveLocation=/cont\n", id="continuation"
        ),
        pytest.param(HEAD + "StateSaveLocation=/s\\#1 # a comment\n", id="escaped-hash-in-value"),
        pytest.param(
            HEAD + "NodeName=n[1-2] CPUs=2 StateSaveLocation=/ignored\n"
            "PartitionName=p Nodes=ALL Default=YES\n",
            id="record-keys-are-not-settings",
        ),
        pytest.param(
            HEAD + "KillWait=5 NodeName=n1 SlurmdPort=1\n", id="setting-before-record-on-line"
        ),
        pytest.param(
            "ClusterName=x\nControlMachine=m\nControlAddr=10.0.0.9\nBackupController=b\n",
            id="legacy-controller-keys",
        ),
        pytest.param(HEAD + "StateSaveLocation=/a\nStateSaveLocation=/b\n", id="last-wins"),
        pytest.param(
            HEAD + "BcastParameters=DestDir=/scratch,compression=LZ4,Send_Libs\n"
            "BcastExclude=/opt/lib,/usr/lib\n",
            id="bcast",
        ),
        pytest.param(HEAD + "BcastExclude=NONE\n", id="bcast-exclude-none"),
    ],
)
def test_client_settings_agree_with_full_model(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    _same(client_settings(path), load(path))


def test_client_settings_follow_includes(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    _write(tmp_path, "StateSaveLocation=/from/include\n", "conf.d/big.conf")
    path = _write(tmp_path, "ClusterName=Big\nSlurmctldHost=c\nInclude conf.d/%c.conf\n")
    client = client_settings(path)
    assert client.state_save_location == "/from/include"
    _same(client, load(path))


def test_client_settings_use_slurm_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, HEAD + "StateSaveLocation=/env\n")
    monkeypatch.setenv("SLURM_CONF", path)
    assert client_settings().state_save_location == "/env"
    assert "state_save_location='/env'" in repr(client_settings())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("SlurmctldHost=c\n", "{path}: ClusterName needs to be specified"),
        pytest.param("ClusterName=c\n", "{path}: SlurmctldHost needs to be specified"),
        pytest.param(
            "ClusterName=c\nSlurmctldHost=a(b\n", "{path}:2: bad SlurmctldHost value 'a(b'"
        ),
        pytest.param(
            "ClusterName=c\nSlurmctldHost=a\nControlMachine=b\n",
            "{path}:3: ControlMachine cannot be used with SlurmctldHost",
        ),
        pytest.param(HEAD + "KillWait=1 junk\n", '{path}:3: cannot parse "junk"'),
        pytest.param(HEAD + 'Epilog="a b\n', '{path}:3: cannot parse "b"'),
        pytest.param(
            HEAD + "SlurmdPort=70000\n", "{path}:3: bad SlurmdPort value '70000': not in 1..65535"
        ),
        pytest.param(
            HEAD + "SlurmctldPort=http\n",
            "{path}:3: bad SlurmctldPort value 'http': not a port or port range",
        ),
        pytest.param(
            HEAD + "MaxArraySize=lots\n", "{path}:3: bad MaxArraySize value 'lots': not a number"
        ),
        pytest.param(
            "Include %c.conf\nClusterName=c\n",
            "{path}:1: Include %c.conf: %c used before ClusterName is set",
        ),
        pytest.param(HEAD + "Include slurm.conf\n", "{path}:3: Include slurm.conf: include loop"),
        pytest.param(
            HEAD + "BcastParameters=DestDir=/s,Bogus\n",
            "{path}:3: BcastParameters: unknown option 'Bogus'",
        ),
        pytest.param(
            HEAD + "BcastParameters=DestDir=tmp\n",
            "{path}:3: BcastParameters DestDir=tmp is not an absolute path",
        ),
        pytest.param(
            HEAD + "BcastParameters=Compression=zzz\n",
            "{path}:3: BcastParameters Compression=zzz: use lz4, none or zlib",
        ),
        pytest.param(
            HEAD + "BcastExclude=lib\n", "{path}:3: BcastExclude: lib is not an absolute path"
        ),
    ],
)
def test_client_errors_match_full_model(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    expected = message.format(path=path)
    with pytest.raises(ConfigError) as full:
        load(path)
    with pytest.raises(ConfigError) as client:
        client_settings(path)
    assert str(client.value) == str(full.value) == expected


def test_client_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "none.conf")
    with pytest.raises(ConfigError) as caught:
        client_settings(path)
    assert str(caught.value) == f"{path}: cannot read: No such file or directory"


def test_client_leaves_node_and_partition_checks_to_the_daemons(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + "NodeName=n[1- CPUs=two\nPartitionName=p MaxTime=soon\n")
    with pytest.raises(ConfigError):
        load(path)
    assert client_settings(path).cluster_name == "test"


_KEYS = [
    "ClusterName",
    "clustername",
    "SlurmctldHost",
    "ControlMachine",
    "ControlAddr",
    "BackupController",
    "StateSaveLocation",
    "SlurmctldPort",
    "SlurmdPort",
    "MaxArraySize",
    "NodeName",
    "PartitionName",
    "KillWait",
    "Include",
]
_VALUES = st.one_of(
    st.sampled_from(["c", "a(b)", "a(b", "/s", "6817", "1-2", "[7000-7001]", "4k", "n[1-2]", "%c"]),
    st.text(alphabet='ab1 ="\\#()[]-k', max_size=8),
)
_LINE = st.one_of(
    st.builds("{}={}".format, st.sampled_from(_KEYS), _VALUES),
    st.text(alphabet='ab1 ="\\#()\t', max_size=12),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=300)
@given(st.lists(st.lists(_LINE, min_size=1, max_size=3).map(" ".join), max_size=6))
def test_client_never_disagrees_with_a_valid_file(tmp_path: Path, lines: list[str]) -> None:
    """Whatever the full model accepts, the client reads the same values from."""
    path = _write(tmp_path, "\n".join(lines) + "\n")
    try:
        full = load(path)
    except ConfigError:
        with contextlib.suppress(ConfigError):
            client_settings(path)
        return
    _same(client_settings(path), full)


# ------------------------------------------------------------------ the tokenizer
# The grammar as regular expressions, as the parser used to apply them; the
# string-scanning tokenizer must agree on every input.
_KEY_VALUE = re.compile(r'\s*([A-Za-z0-9_.]+)\s*=\s*(?:"([^"]*)"|(\S+))(?=\s|$)')
_COMMENT = re.compile(r"(?<!\\)(?:\\\\)*#")
_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)
_INCLUDE = re.compile(r"\s*include\s+(\S+)\s*", re.IGNORECASE)


def _reference_lines(text: str) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 1
    for number, raw in enumerate(text.split("\n"), 1):
        if not pending:
            start = number
        comment = _COMMENT.search(raw)
        body = raw if comment is None else raw[: comment.end() - 1]
        stripped = body.rstrip()
        if (len(stripped) - len(stripped.rstrip("\\"))) % 2:
            pending.append(stripped[:-1])
            continue
        pending.append(body)
        lines.append((start, _ESCAPE.sub(r"\1", "".join(pending))))
        pending = []
    if pending:
        lines.append((start, _ESCAPE.sub(r"\1", "".join(pending))))
    return lines


def _reference_pairs(line: str) -> list[tuple[str, str]] | str:
    found: list[tuple[str, str]] = []
    pos = 0
    while (match := _KEY_VALUE.match(line, pos)) is not None:
        value = match.group(2) if match.group(2) is not None else match.group(3)
        found.append((match.group(1), value))
        pos = match.end()
    rest = line[pos:].strip()
    return f'p:1: cannot parse "{rest}"' if rest else found


_TEXT = st.text(alphabet='aB1_.= "\t\\#\n\x0b\u00a0incldue', max_size=40)


@given(_TEXT)
def test_tokenizer_matches_the_regular_grammar(text: str) -> None:
    lines = list(confsyntax.logical_lines(text))
    assert lines == _reference_lines(text)
    for _, line in lines:
        try:
            pairs: list[tuple[str, str]] | str = confsyntax.pairs(line, ("p", 1))
        except ConfigError as exc:
            pairs = str(exc)
        assert pairs == _reference_pairs(line)
        include = _INCLUDE.fullmatch(line)
        assert confsyntax.include_target(line) == (include.group(1) if include else None)


_PORTS = re.compile(r"\[?(\d{1,5})(?:-(\d{1,5}))?\]?", re.ASCII)
_INTEGER = re.compile(r"(\d{1,20})([kK]?)", re.ASCII)
_CTLD_HOST = re.compile(r"([^()\s]+)(?:\(([^()\s]+)\))?")


def _outcome(check: Callable[[], object]) -> object:
    try:
        return check()
    except ConfigError as exc:
        return str(exc)


@given(st.text(alphabet="0159k[]-( )a\u0661\u00a0", max_size=8))
def test_value_checks_match_the_regular_grammar(value: str) -> None:
    where = ("p", 1)
    number = _INTEGER.fullmatch(value)
    expected: object = f"p:1: bad N value '{value}': not a number"
    if number is not None:
        expected = int(number[1]) * (1024 if number[2] else 1)
        if expected > 65535:
            expected = f"p:1: bad N value '{value}': not in 0..65535"
    assert _outcome(lambda: confsyntax.integer("N", value, where, maximum=65535)) == expected

    ports = _PORTS.fullmatch(value)
    expected = f"p:1: bad P value '{value}': not a port or port range"
    if ports is not None:
        low, high = int(ports[1]), int(ports[2] or ports[1])
        expected = list(range(low, high + 1))
        if not 0 < low <= high <= 65535:
            expected = f"p:1: bad P value '{value}': not in 1..65535"
    assert _outcome(lambda: confsyntax.port_range("P", value, where)) == expected

    host = _CTLD_HOST.fullmatch(value)
    expected = f"p:1: bad SlurmctldHost value '{value}'"
    if host is not None:
        expected = (host[1], host[2] or host[1])
    assert _outcome(lambda: confsyntax.controller(value, where)) == expected
