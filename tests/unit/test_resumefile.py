"""SLURM_RESUME_FILE's text and file (``controller/resumefile.py``)."""

from __future__ import annotations

from pathlib import Path

from controller import resumefile
from tests.unit.scenario import running


def test_the_text_is_slurm_22_05s_one_line_of_jobs_then_all_nodes() -> None:
    # As Debian's slurmctld 22.05 wrote it for three CLOUD nodes and two jobs.
    text = resumefile.content([running(7, ("n3",)), running(2, ("n1", "n2"))], ["n2", "n1", "n3"])
    assert text == (
        '{"jobs":[{"job_id":2,"nodes":"n[1-2]"},{"job_id":7,"nodes":"n3"}],"all_nodes":"n[1-3]"}'
    )
    assert resumefile.content([], ["n4"]) == '{"jobs":[],"all_nodes":"n4"}'  # POWER_UP


def test_the_file_is_readable_by_path_while_the_block_runs_and_gone_after() -> None:
    with resumefile.memory_file('{"jobs":[]}') as path:
        assert Path(path).read_text() == '{"jobs":[]}'
    assert not Path(path).exists()
