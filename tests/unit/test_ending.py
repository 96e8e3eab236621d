"""The kill sequence and use figures shared by the supervisor and the step runner."""

from __future__ import annotations

import resource
import signal

from nodeagent.ending import KillSequence, Use, use_of


def test_begin_sends_cont_and_term_then_kill_when_due() -> None:
    sent: list[int] = []
    ending = KillSequence(sent.append)
    assert ending.due(100.0) is None  # nothing begun: nothing due
    assert ending.begin("cancelled", 130.0)
    assert sent == [signal.SIGCONT, signal.SIGTERM]
    assert ending.due(129.9) == 130.0
    assert sent == [signal.SIGCONT, signal.SIGTERM]
    assert ending.due(130.0) is None
    assert sent == [signal.SIGCONT, signal.SIGTERM, signal.SIGKILL]
    assert ending.due(200.0) is None  # KILL is sent once
    assert sent.count(signal.SIGKILL) == 1


def test_a_second_request_keeps_the_reason_and_only_brings_kill_forward() -> None:
    sent: list[int] = []
    ending = KillSequence(sent.append)
    ending.begin("time limit reached", 160.0)
    assert not ending.begin("cancelled", 200.0)
    assert (ending.why, ending.kill_at) == ("time limit reached", 160.0)
    assert not ending.begin("srun closed the connection", 140.0)
    assert (ending.why, ending.kill_at) == ("time limit reached", 140.0)
    assert sent == [signal.SIGCONT, signal.SIGTERM]  # one TERM, whatever came after


class _Usage:
    def __init__(self, rss: int, user: float, system: float) -> None:
        self.ru_maxrss, self.ru_utime, self.ru_stime = rss, user, system


def test_use_of_takes_the_largest_rss_and_sums_the_rest() -> None:
    use = use_of([_Usage(100, 1.5, 0.25), _Usage(300, 0.5, 0.0)])
    assert use == Use(max_rss_kb=300, sum_rss_kb=400, user_cpu_us=2_000_000, sys_cpu_us=250_000)
    assert use_of([]) == Use()


def test_use_of_reads_a_real_rusage() -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    use = use_of([usage])
    assert use.max_rss_kb == use.sum_rss_kb == usage.ru_maxrss > 0
