"""Licenses on a real cluster: Licenses=fluent:3, two jobs asking for two each. The
second waits with reason Licenses while the first holds them and starts once it ends;
scontrol, squeue and scontrol update show and change them; a license the cluster does
not have is refused at submission in Slurm's words."""

from __future__ import annotations

from pathlib import Path

from tests.integration.cluster import Cluster

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.2; done"


def _licenses(c: Cluster) -> str:
    return c.run("scontrol", "show", "licenses").stdout


def test_a_job_waits_for_licenses_and_starts_when_they_are_released(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c: Cluster = make_cluster(nodes=2, settings=("Licenses=fluent:3,ansys",))
    work: Path = c.dir
    script = work / "first.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH -L fluent:2\n{WAIT_FOR_GO}\n")
    first = c.sbatch("-D", str(work), "-o", "/dev/null", str(script))
    c.wait_state(first, {"RUNNING"})
    second = c.sbatch("--licenses=fluent:2", "-D", str(work), "-o", "/dev/null", "--wrap", "true")
    c.wait_for(lambda: c.job(second)["reason"] == "Licenses", 15, "no Licenses reason")
    assert c.job(second)["state"] == "PENDING"

    assert _licenses(c) == (
        "LicenseName=ansys\n    Total=1 Used=0 Free=1 Reserved=0 Remote=no\n"
        "LicenseName=fluent\n    Total=3 Used=2 Free=1 Reserved=0 Remote=no\n"
    )
    one = c.run("scontrol", "-o", "show", "lic", "ansys").stdout
    assert one == "LicenseName=ansys Total=1 Used=0 Free=1 Reserved=0 Remote=no\n"
    assert c.run("scontrol", "show", "licenses", "nastran").stdout == ""
    shown = c.run("scontrol", "show", "job", str(second)).stdout
    assert "JobState=PENDING Reason=Licenses " in shown, shown
    assert " Licenses=fluent:2 Network=(null)" in shown, shown
    rows = c.run("squeue", "-h", "-L", "fluent", "-o", "%i %W %r").stdout.splitlines()
    assert sorted(rows) == [f"{first} fluent:2 None", f"{second} fluent:2 Licenses"], rows
    assert c.run("squeue", "-h", "-L", "ansys", "-o", "%i").stdout == ""

    why = c.run("corral", "why", str(second)).stdout
    assert "is pending: Licenses" in why, why
    assert "License fluent: asks 2 of 3, 1 free now (scontrol show licenses)." in why, why

    # While it waits its request may change; a name the cluster lacks is refused.
    bad = c.run("scontrol", "update", f"JobId={second}", "Licenses=matlab", check=False)
    assert bad.returncode == 1
    assert "Invalid license specification" in bad.stderr, bad.stderr
    c.run("scontrol", "update", f"JobId={second}", "Licenses=fluent:2,ansys")
    assert c.job(second)["licenses"] == "fluent:2,ansys:1"

    (work / "go").touch()
    c.wait_done(first)
    c.wait_state(second, {"RUNNING", "COMPLETING", "COMPLETED"})
    assert c.wait_done(second)["state"] == "COMPLETED"
    assert "Used=0 Free=3" in _licenses(c)


def test_an_unknown_or_oversized_license_request_is_refused(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c: Cluster = make_cluster(nodes=1, settings=("Licenses=fluent:3",))
    for asked in ("matlab", "fluent:4", "fluent:0", "fluent|ansys"):
        refused = c.run("sbatch", "-L", asked, "--wrap", "true", check=False)
        assert refused.returncode == 1, asked
        assert refused.stderr == (
            "sbatch: error: Batch job submission failed: Invalid license specification\n"
        ), (asked, refused.stderr)
    for prog in ("salloc", "srun"):
        refused = c.run(prog, "-L", "matlab", "true", check=False)
        assert refused.returncode == 1, (prog, refused)
        assert refused.stderr.endswith(": Invalid license specification\n"), refused.stderr
    assert c.jobs() == []
    ran = c.run("srun", "-L", "fluent:3", "-t", "1", "true")
    assert ran.returncode == 0, ran
    assert [j["licenses"] for j in c.jobs()] == ["fluent:3"]
