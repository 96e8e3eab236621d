"""cli.sbatch.script: script checks, --wrap, path resolution and #SBATCH directives."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.failure import Failure
from cli.sbatch.script import check, directives, read, resolve, split, wrap

SHEBANG_LINES = (
    "This does not look like a batch script.  The first",
    "line must start with #! followed by the path to an interpreter.",
    "For instance: #!/bin/sh",
)


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        pytest.param(b"", ("Batch script is empty!",), id="empty"),
        pytest.param(b" \n\t\n", ("Batch script contains only whitespace!",), id="whitespace"),
        pytest.param(b"\0#!/bin/sh\n", ("Batch script contains only whitespace!",), id="nul-first"),
        pytest.param(b"echo hi\n", SHEBANG_LINES, id="no-shebang"),
        pytest.param(b" #!/bin/sh\n", SHEBANG_LINES, id="indented-shebang"),
        pytest.param(
            b"#!/bin/sh\necho \0\n",
            (
                "The Slurm controller does not allow scripts that",
                "contain a NULL character '\\0'.",
            ),
            id="nul",
        ),
        pytest.param(
            b"#!/bin/sh\r\necho hi\r\n",
            (
                "Batch script contains DOS line breaks (\\r\\n)",
                "instead of expected UNIX line breaks (\\n).",
            ),
            id="dos",
        ),
        pytest.param(b"#!/bin/sh\necho \xff\n", ("Batch script is not valid UTF-8 text",),
                     id="not-utf8"),
    ],
)  # fmt: skip
def test_bad_scripts(data: bytes, lines: tuple[str, ...]) -> None:
    with pytest.raises(Failure) as info:
        check(data)
    assert info.value.lines == lines
    assert info.value.status is None


def test_good_script_keeps_lone_carriage_returns() -> None:
    assert check(b"#!/bin/sh\necho a\rb\n") == "#!/bin/sh\necho a\rb\n"


def test_wrap_is_byte_exact() -> None:
    assert wrap("hostname; sleep 1") == (
        "#!/bin/sh\n# This script was created by sbatch --wrap.\n\nhostname; sleep 1\n"
    )


def test_read_missing_file() -> None:
    with pytest.raises(Failure) as info:
        read("/nonexistent/job.sh")
    assert info.value.lines == ("Unable to open file /nonexistent/job.sh",)


def test_resolve_order(tmp_path: Path) -> None:
    cwd, bin_dir = tmp_path / "cwd", tmp_path / "bin"
    cwd.mkdir()
    bin_dir.mkdir()
    (bin_dir / "tool.sh").write_text("#!/bin/sh\n")
    (bin_dir / "both.sh").write_text("#!/bin/sh\n")
    (cwd / "both.sh").write_text("#!/bin/sh\n")
    path = str(bin_dir)
    assert resolve("tool.sh", str(cwd), path) == str(bin_dir / "tool.sh")
    assert resolve("both.sh", str(cwd), path) == str(cwd / "both.sh")
    assert resolve("./tool.sh", str(cwd), path) == os.path.join(str(cwd), "./tool.sh")
    assert resolve("/x/y.sh", str(cwd), path) == "/x/y.sh"
    assert resolve("missing.sh", str(cwd), path) == "missing.sh"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param(" -J name -p debug", ["-J", "name", "-p", "debug"], id="simple"),
        pytest.param("\t--time=10\t", ["--time=10"], id="tabs"),
        pytest.param(' --comment="a b c"', ["--comment=a b c"], id="double-quotes"),
        pytest.param(" --comment='a \"b\"'", ['--comment=a "b"'], id="single-quotes"),
        pytest.param(" -J \"a\"b'c d'", ["-J", "abc d"], id="adjacent-quotes-join"),
        pytest.param(r" -J a\ b", ["-J", "a b"], id="escaped-space"),
        pytest.param(r" -J a\"b", ["-J", 'a"b'], id="escaped-quote"),
        pytest.param(r" -J a\#b", ["-J", "a#b"], id="escaped-hash"),
        pytest.param(r" -J a\\b", ["-J", "a\\b"], id="escaped-backslash"),
        pytest.param(r' -J "a\"b"', ["-J", 'a"b'], id="escape-inside-quotes"),
        pytest.param(" -N 2 # two nodes", ["-N", "2"], id="comment"),
        pytest.param(" -N 2# two nodes", ["-N", "2"], id="comment-glued"),
        pytest.param(' --comment="a # b"', ["--comment=a # b"], id="hash-in-quotes"),
        pytest.param(' --comment ""', ["--comment", ""], id="empty-quoted-word"),
        pytest.param("", [], id="nothing"),
        pytest.param("   ", [], id="blank"),
        pytest.param("\\", [], id="trailing-backslash"),
    ],
)
def test_split(text: str, words: list[str]) -> None:
    assert split(text, "job.sh", 2) == words


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(' --comment="abc', 'job.sh: line 3: Unmatched `"` in [ --comment="abc]',
                     id="double"),
        pytest.param(" -J 'x", "job.sh: line 3: Unmatched `'` in [ 'x]", id="single"),
        pytest.param(" -N 2 : -N 3", "job.sh: line 3: Unexpected `:` in [ : -N 3]", id="colon"),
    ],
)  # fmt: skip
def test_split_errors(text: str, message: str) -> None:
    with pytest.raises(Failure) as info:
        split(text, "job.sh", 3)
    assert info.value.lines == (message,)
    assert (info.value.level, info.value.status) == ("fatal", 1)


SCRIPT = """#!/bin/bash
#SBATCH -J first
#SBATCH --time=10   # minutes

# a comment, then a blank line, do not stop
  #SBATCH --indented-is-a-comment
#SBATCH -p debug
echo start
#SBATCH --too-late
"""


def test_directives_stop_at_first_command() -> None:
    assert directives(SCRIPT, "job.sh") == [["-J", "first", "--time=10", "-p", "debug"]]


def test_directives_need_column_zero_and_exact_case() -> None:
    script = "#!/bin/sh\n#sbatch -J lower\n #SBATCH -J space\n#SBATCH -J ok\n"
    assert directives(script, "job.sh") == [["-J", "ok"]]


def test_slurm_prefix_warns_once(capsys: pytest.CaptureFixture[str]) -> None:
    script = "#!/bin/sh\n#SLURM -J old\n#SLURM -N 1\n"
    assert directives(script, "job.sh") == [["-J", "old", "-N", "1"]]
    assert capsys.readouterr().err == (
        "sbatch: error: Change from #SLURM to #SBATCH in your script and verify the options "
        "are valid in sbatch\n"
    )


def test_hetjob_lines_separate_the_components() -> None:
    script = "#!/bin/sh\n#SBATCH -N 1\n#SBATCH hetjob\n#SBATCH -N 2\n#SBATCH  PACKJOB # old\n"
    assert directives(script, "job.sh") == [["-N", "1"], ["-N", "2"], []]


WORD = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=10)


@given(st.text(max_size=60))
def test_split_raises_only_failure(text: str) -> None:
    try:
        words = split(text, "job.sh", 1)
    except Failure:
        return
    assert all(isinstance(word, str) for word in words)


@given(st.lists(WORD, max_size=6))
def test_split_inverts_quoting(words: list[str]) -> None:
    """Single-quoted words come back unchanged (backslashes escape even inside quotes)."""
    quoted = " ".join(
        "'" + word.replace("\\", "\\\\").replace("'", "'\"'\"'") + "'" for word in words
    )
    assert split(quoted, "job.sh", 1) == words


@given(st.text(max_size=200))
def test_directives_raise_only_failure(script: str) -> None:
    with contextlib.suppress(Failure):
        directives("#!/bin/sh\n" + script, "job.sh")
