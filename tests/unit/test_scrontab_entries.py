"""What the scrontab client sends for each entry (cli/scrontab.py): the job sbatch would
make of its #SCRON lines, Slurm's script around its command, its times and lines."""

from __future__ import annotations

import pytest

from cli.scrontab import _marked, entries_to_jobs
from corral.crontab import CrontabError


def test_each_entry_is_a_job_with_its_scron_options_and_slurms_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    text = "# mine\n#SCRON -t 5\n#SCRON -J tick\n*/20 * * * * /bin/echo hi\n@daily date -u\n"
    first, second = entries_to_jobs(text)
    assert (first["cron_spec"], first["line_start"], first["line_end"]) == ("0,20,40 * * * *", 2, 4)
    assert (first["spec"]["name"], first["spec"]["time_limit"]) == ("tick", 5)
    assert first["spec"]["script"] == (
        "#!/bin/sh\n# This job was submitted through scrontab\n#SCRON -t 5\n#SCRON -J tick\n"
        "# crontab time request was: '0,20,40 * * * *'\n/bin/echo hi\n"
    )
    assert (second["cron_spec"], second["line_start"], second["line_end"]) == ("0 0 * * *", 5, 5)
    assert (second["spec"]["name"], second["spec"]["work_dir"]) == ("date", "/home/u")
    assert "time_limit" not in second["spec"]  # options end with their entry


@pytest.mark.parametrize(
    ("text", "line", "detail"),
    [
        ("@hourly a\n#SCRON --bogus\n* * * * * b\n", 2, "unrecognized option '--bogus'"),
        ("#SCRON -t 1 extra\n* * * * * b\n", 1, "Invalid option found in #SCRON line: extra"),
        ("#SCRON -t 1\n* * * * b\n", 2, "bad day specification"),
    ],
    ids=["unknown option", "a stray word", "a bad time after good options"],
)
def test_bad_lines_are_named(text: str, line: int, detail: str) -> None:
    with pytest.raises(CrontabError) as refused:
        entries_to_jobs(text)
    assert (refused.value.line, refused.value.detail) == (line, detail)


def test_lines_are_marked_as_slurm_marks_them() -> None:
    text = "a\nb\nc\nd\n"
    assert _marked(text, "2-3", "#DISABLED: ") == "a\n#DISABLED: b\n#DISABLED: c\nd\n"
    assert _marked("a\nb", "1,2", "#BAD: ") == "#BAD: a\n#BAD: b\n"
    assert _marked(text, "", "#BAD: ") == text
