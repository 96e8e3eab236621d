"""corral-restd against a live cluster: tokens, a client that knows only the
OpenAPI document, other users' jobs, the versions' differences, bad input,
a Unix socket, HTTPS, and the gateway's own metrics."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from prometheus_client.parser import text_string_to_metric_families

from corral import auth, errors, tokens
from corral.config import load
from corral.errors import SlurmError
from restd.controller import Caller, Controller
from tests.integration.cluster import Cluster
from tests.integration.rest import Rest

MAX_BODY = 64 << 10
V = "/slurm/v0.0.42"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Rest]]:
    """A cluster and its restd (root's token), shared by this module's tests."""
    settings = ("KillWait=2", "SchedulerParameters=bf_interval=1", "Licenses=foo:3")
    cluster = Cluster(tmp_path_factory.mktemp("restd"), nodes=2, settings=settings)
    try:
        cluster.start()
        url = cluster.start_restd("--max-body", str(MAX_BODY))
        yield cluster, Rest(url, token_for(cluster, "root"))
    finally:
        cluster.stop()


def token_for(cluster: Cluster, user: str, lifespan: int = 600) -> str:
    out = cluster.run("scontrol", "token", f"lifespan={lifespan}", f"username={user}").stdout
    return out.strip().split("=", 1)[1]


def job_desc(cluster: Cluster, **fields: Any) -> dict[str, Any]:
    return {
        "script": "#!/bin/sh\nsleep 60\n",
        "environment": ["PATH=/bin:/usr/bin"],
        "current_working_directory": str(cluster.dir),
        **fields,
    }


class OpenApiClient:
    """A client that knows the gateway only through ``/openapi/v3``: it finds each
    operation by its operationId and builds the request from the document."""

    def __init__(self, rest: Rest) -> None:
        self.rest = rest
        status, doc = rest.call("GET", "/openapi/v3", headers={})
        assert status == 200 and doc["openapi"].startswith("3.")
        self.operations = {
            spec["operationId"]: (method.upper(), path, spec)
            for path, methods in doc["paths"].items()
            for method, spec in methods.items()
        }

    def __call__(self, operation: str, body: Any = None, **values: Any) -> dict[str, Any]:
        method, path, spec = self.operations[operation]
        query = {}
        for param in spec.get("parameters", []):
            if param["name"] not in values:
                assert not param["required"], f"{operation} needs {param['name']}"
            elif param["in"] == "path":
                path = path.replace("{" + param["name"] + "}", str(values[param["name"]]))
            else:
                query[param["name"]] = values[param["name"]]
        if query:
            path += "?" + urlencode(query)
        assert (body is not None) == ("requestBody" in spec), operation
        status, reply = self.rest.call(method, path, body)
        assert status == 200 and reply["errors"] == [], (operation, status, reply)
        return reply


def test_a_client_written_from_the_openapi_document_runs_a_job(
    gateway: tuple[Cluster, Rest],
) -> None:
    cluster, rest = gateway
    api = OpenApiClient(rest)
    submitted = api(
        "post_slurm_v0_0_42_job_submit", {"job": job_desc(cluster, name="from-openapi")}
    )
    job = submitted["job_id"]
    cluster.wait_state(job, {"RUNNING"}, timeout=20)
    listed = api("get_slurm_v0_0_42_jobs")["jobs"]
    assert [j["name"] for j in listed if j["job_id"] == job] == ["from-openapi"]
    api("post_slurm_v0_0_42_job_job_id", {"time_limit": 5, "comment": "via REST"}, job_id=job)
    shown = api("get_slurm_v0_0_42_job_job_id", job_id=job)["jobs"][0]
    assert shown["time_limit"] == {"set": True, "infinite": False, "number": 5}
    assert (shown["comment"], shown["job_state"], shown["user_name"]) == (
        "via REST",
        ["RUNNING"],
        "root",
    )
    assert cluster.job(job)["time_limit"] == 5  # what squeue and scontrol see
    api("delete_slurm_v0_0_42_job_job_id", job_id=job)
    assert cluster.wait_done(job)["state"] == "CANCELLED"
    nodes = api("get_slurm_v0_0_42_nodes")["nodes"]
    assert sorted(n["name"] for n in nodes) == ["node1", "node2"]
    assert api("get_slurm_v0_0_42_ping")["pings"][0]["responding"] is True


def test_tokens_that_are_missing_expired_forged_or_misused_are_refused(
    gateway: tuple[Cluster, Rest],
) -> None:
    cluster, rest = gateway
    now = int(time.time())
    key = auth.Keys.derive(auth.load_key(auth.key_path(cluster.conf))).jwt
    expired = tokens.mint(key, "root", now - 100, lifespan=10)
    forged = tokens.mint(b"not the cluster key, but as long", "root", now)
    cases = {
        "none": ({}, 401),
        "expired": ({"X-SLURM-USER-TOKEN": expired}, 401),
        "forged": ({"X-SLURM-USER-TOKEN": forged}, 401),
        "garbage": ({"Authorization": "Bearer not.a.jwt"}, 401),
        "both": ({"X-SLURM-USER-TOKEN": rest.token, "Authorization": f"Bearer {rest.token}"}, 401),
        "bearer": ({"Authorization": f"Bearer {rest.token}"}, 200),
        "unknown user": ({"X-SLURM-USER-TOKEN": tokens.mint(key, "nosuchuser9", now)}, 403),
    }
    for name, (headers, wanted) in cases.items():
        status, reply = rest.call("GET", f"{V}/jobs", headers=headers)
        assert status == wanted, (name, reply)
        if wanted != 200:
            assert reply["errors"] and reply["errors"][0]["error_number"], name


def test_users_change_only_their_own_jobs(
    gateway: tuple[Cluster, Rest], users: tuple[str, ...]
) -> None:
    cluster, root = gateway
    owner, other = (Rest(root.base, token_for(cluster, name)) for name in users)
    status, reply = owner.call("POST", f"{V}/job/submit", {"job": job_desc(cluster, hold=True)})
    assert status == 200, reply
    job = reply["job_id"]
    assert cluster.job(job)["user"] == users[0]  # the token's user, not restd's
    # Acting as someone else takes a proxy's (root's) token.
    status, reply = other.call(
        "GET", f"{V}/jobs", headers={"X-SLURM-USER-TOKEN": other.token, "X-SLURM-USER-NAME": "root"}
    )
    assert status == 403
    for method, body in (("DELETE", None), ("POST", {"comment": "mine now"})):
        status, reply = other.call(method, f"{V}/job/{job}", body)
        assert status == 403, (method, reply)
        assert reply["errors"][0]["error"] == "Access/permission denied"
    assert cluster.job(job)["state"] == "PENDING"
    status, _ = owner.call("POST", f"{V}/job/{job}", {"comment": "still mine"})
    assert status == 200 and cluster.job(job)["comment"] == "still mine"
    status, _ = root.call("DELETE", f"{V}/job/{job}")
    assert status == 200 and cluster.wait_done(job)["state"] == "CANCELLED"


def test_only_operators_mint_tokens_for_others(
    gateway: tuple[Cluster, Rest], users: tuple[str, ...]
) -> None:
    """scontrol token username=U, asked as an ordinary user: the controller's check,
    reached with that user's signed credential, as their scontrol would."""
    cluster, _ = gateway
    keys = auth.Keys.derive(auth.load_key(auth.key_path(cluster.conf)))
    conf = load(cluster.conf)

    async def mint(username: str) -> str:
        receiver = auth.controller_receiver(conf.cluster_name)
        controller = Controller(conf.controller_targets, keys.credential, receiver, conf.tls)
        try:
            reply = await controller.call("Token", Caller.named(users[0]), username=username)
            return str(reply.token)
        finally:
            await controller.close()

    with pytest.raises(SlurmError) as refused:
        asyncio.run(mint("root"))
    assert refused.value.code == errors.ESLURM_ACCESS_DENIED
    own = asyncio.run(mint(""))
    assert tokens.user_of(keys.jwt, own, int(time.time())) == users[0]


def test_why_pending_over_rest_is_corral_whys_answer(gateway: tuple[Cluster, Rest]) -> None:
    cluster, rest = gateway
    blocker = cluster.sbatch("-N", "1", "--exclusive", "-t", "10", "--wrap", "sleep 120")
    cluster.wait_state(blocker, {"RUNNING"})
    waiting = cluster.sbatch("-N", "2", "--exclusive", "-t", "5", "--wrap", "true")
    try:
        cluster.wait_for(lambda: cluster.job(waiting)["start_time"] > 0, 15, "no plan")
        for _ in range(10):  # a backfill pass runs every second: two answers of one pass
            status, reply = rest.call("GET", f"/corral/v1/job/{waiting}/why")
            words = cluster.run("corral", "why", "--json", str(waiting)).stdout
            served, printed = reply["why"], json.loads(words)
            if {**served, "now": 0} == {**printed, "now": 0}:  # starts and suggestions alike
                break
        assert status == 200 and reply["errors"] == []
        assert {**served, "now": 0} == {**printed, "now": 0}
        assert served["blockers"][0]["job_id"] == blocker and served["reason"] == "Resources"
        status, reply = rest.call("GET", "/corral/v1/job/999999/why")
        assert status == 404 and reply["errors"][0]["error"] == "Invalid job id specified"
    finally:
        cluster.run("scancel", str(blocker), str(waiting))


def test_operators_drain_and_resume_a_node(
    gateway: tuple[Cluster, Rest], users: tuple[str, ...]
) -> None:
    cluster, root = gateway
    user = Rest(root.base, token_for(cluster, users[0]))
    drain = {"state": ["DRAIN"], "reason": "disk check"}
    status, reply = user.call("POST", f"{V}/node/node2", drain)
    assert status == 403, reply
    status, reply = root.call("POST", f"{V}/node/node2", drain)
    assert status == 200, reply
    try:
        status, reply = user.call("GET", f"{V}/node/node2")
        node = reply["nodes"][0]
        assert "DRAIN" in node["state"] and node["reason"] == "disk check", node
        assert "drain" in cluster.run("sinfo", "-h", "-n", "node2", "-o", "%T").stdout
    finally:
        status, reply = root.call("POST", f"{V}/node/node2", {"state": ["RESUME"]})
    assert status == 200, reply
    resumed = root.call("GET", f"{V}/node/node2")[1]["nodes"][0]
    assert "DRAIN" not in resumed["state"], resumed


def test_signals_listings_since_a_time_and_reservations(gateway: tuple[Cluster, Rest]) -> None:
    """DELETE with ?signal= signals without cancelling; ?update_time= lists nothing
    when nothing changed since; reservations as scontrol made them."""
    cluster, rest = gateway
    out = cluster.dir / "usr1.out"
    script = f"#!/bin/sh\ntrap 'echo got USR1 >> {out}' USR1\necho ready >> {out}\n"
    script += "sleep 60 & wait; sleep 60 & wait\n"
    status, reply = rest.call("POST", f"{V}/job/submit", {"job": job_desc(cluster, script=script)})
    job = reply["job_id"]
    cluster.wait_for(lambda: out.exists() and "ready" in out.read_text(), 20, "not ready")
    status, reply = rest.call("DELETE", f"{V}/job/{job}?signal=SIGUSR1&flags=BATCH_JOB")
    assert status == 200, reply
    cluster.wait_for(lambda: "got USR1" in out.read_text(), 10, "no USR1")
    assert cluster.job(job)["state"] == "RUNNING"  # signalled, not cancelled
    rest.call("DELETE", f"{V}/job/{job}")
    cluster.wait_done(job)
    _, listed = rest.call("GET", f"{V}/jobs")
    since = listed["last_update"]["number"]
    _, unchanged = rest.call("GET", f"{V}/jobs?update_time={since}")
    assert listed["jobs"] and unchanged["jobs"] == []
    cluster.run(
        "scontrol", "create", "reservation", "ReservationName=rest", "Nodes=node2",
        "StartTime=now+3600", "Duration=60", "Users=root",
    )  # fmt: skip
    try:
        status, reply = rest.call("GET", f"{V}/reservation/rest")
        assert status == 200, reply
        (shown,) = reply["reservations"]
        assert (shown["name"], shown["node_list"], shown["users"]) == ("rest", "node2", "root")
        assert shown["end_time"]["number"] - shown["start_time"]["number"] == 3600
        assert rest.call("GET", f"{V}/reservation/none")[0] == 404
    finally:
        cluster.run("scontrol", "delete", "ReservationName=rest")


def test_licenses_as_scontrol_shows_them(gateway: tuple[Cluster, Rest]) -> None:
    """GET licenses: slurmrestd's keys, Reserved what an active reservation of licenses
    alone keeps and Free what jobs do not hold (Slurm 22.05); a caller without a token
    is refused."""
    cluster, rest = gateway
    cluster.run(
        "scontrol", "create", "reservation", "ReservationName=keep", "Licenses=foo:2",
        "StartTime=now", "Duration=60", "Users=root", "Flags=ANY_NODES",
    )  # fmt: skip
    job = cluster.sbatch("-o", "/dev/null", "-L", "foo:1", "--wrap", "sleep 60")
    try:
        cluster.wait_state(job, {"RUNNING"})
        status, reply = rest.call("GET", f"{V}/licenses")
        assert status == 200, reply
        assert reply["licenses"] == [
            {
                "LicenseName": "foo",
                "Total": 3,
                "Used": 1,
                "Free": 2,
                "Reserved": 2,
                "Remote": False,
            }
        ]
        assert rest.call("GET", f"{V}/licenses", headers={})[0] == 401
    finally:
        cluster.run("scancel", str(job))
        cluster.wait_done(job)
        cluster.run("scontrol", "delete", "ReservationName=keep")


def test_each_version_answers_in_its_own_shape(gateway: tuple[Cluster, Rest]) -> None:
    cluster, rest = gateway
    desc = job_desc(cluster, hold=True)
    script = desc.pop("script")
    status, old = rest.call("POST", "/slurm/v0.0.40/job/submit", {"script": script, "job": desc})
    assert status == 200 and old["result"]["job_id"] == old["job_id"] and old["warnings"] == []
    assert old["meta"]["plugin"]["data_parser"] == "data_parser/v0.0.40"
    status, new = rest.call("POST", f"{V}/job/submit", {"script": script, "job": desc})
    assert status == 200 and "result" not in new
    assert "deprecated" in new["warnings"][0]["description"]
    status, listed = rest.call("GET", f"/slurm/v0.0.41/job/{old['job_id']}")
    assert listed["jobs"][0]["job_state"] == ["PENDING"]
    for job in (old["job_id"], new["job_id"]):
        rest.call("DELETE", f"{V}/job/{job}")


def test_a_heterogeneous_job_through_rest(gateway: tuple[Cluster, Rest]) -> None:
    """``jobs: [...]`` submits one heterogeneous job; each component shows as
    slurmrestd shows it (its own job_id, the leader's het_job_id), a plain job with
    0 and ""; ``123+1`` names a component. Arrays of heterogeneous jobs are refused
    in Slurm's words, and a body giving both ``job`` and ``jobs`` is refused."""
    cluster, rest = gateway
    desc = job_desc(cluster, name="het", tasks=1, hold=True)
    later = {k: v for k, v in job_desc(cluster, tasks=2).items() if k != "script"}
    plain = rest.call("POST", f"{V}/job/submit", {"jobs": [desc]})[1]["job_id"]  # one: plain
    status, reply = rest.call("POST", f"{V}/job/submit", {"jobs": [desc, later]})
    assert status == 200, reply
    leader = reply["job_id"]
    try:
        assert [j["het_job_offset"] for j in cluster.jobs(leader)] == [0, 1]
        status, shown = rest.call("GET", f"{V}/job/{leader}+1")
        assert status == 200, shown
        (second,) = shown["jobs"]
        assert (second["job_id"], second["het_job_id_set"], second["tasks"]["number"]) == (
            leader + 1,
            f"{leader}-{leader + 1}",
            2,
        )
        assert second["het_job_id"] == {"set": True, "infinite": False, "number": leader}
        assert second["het_job_offset"] == {"set": True, "infinite": False, "number": 1}
        assert rest.call("GET", f"{V}/job/{leader + 1}")[1]["jobs"] == [second]
        _, listed = rest.call("GET", f"{V}/jobs")
        offsets = {j["job_id"]: j["het_job_offset"]["number"] for j in listed["jobs"]}
        assert (offsets[leader], offsets[leader + 1]) == (0, 1)
        (alone,) = [j for j in listed["jobs"] if j["job_id"] == plain]
        assert (alone["het_job_id"]["number"], alone["het_job_id_set"]) == (0, "")
    finally:
        rest.call("DELETE", f"{V}/job/{leader}")
        rest.call("DELETE", f"{V}/job/{plain}")
    assert cluster.wait_done(f"{leader}+1")["state"] == "CANCELLED"
    before = len(cluster.jobs())
    arrays = {"jobs": [desc, {**later, "array": "1-2"}]}
    for body, code in (
        (arrays, errors.ESLURM_INVALID_ARRAY),
        ({"job": desc, "jobs": [later]}, errors.ESLURM_REST_INVALID_JOBS_DESC),
    ):
        status, refused = rest.call("POST", f"{V}/job/submit", body)
        assert status == 400 and refused["errors"][0]["error_number"] == code, refused
    assert refused["errors"][0]["error"].startswith("Jobs description entry not found")
    assert len(cluster.jobs()) == before


def test_bad_input_gets_a_4xx_in_slurms_envelope(gateway: tuple[Cluster, Rest]) -> None:
    cluster, rest = gateway
    submit = f"{V}/job/submit"
    desc = job_desc(cluster)
    cases: list[tuple[str, str, bytes | None, int, str]] = [
        ("POST", submit, b"{not json", 400, "parse"),
        ("POST", submit, b"[1, 2]", 400, "expected object"),
        ("POST", submit, json.dumps({"job": {**desc, "tasks": "two"}}).encode(), 400, "tasks"),
        ("POST", submit, json.dumps({"job": {**desc, "bogus": 1}}).encode(), 400, "unknown field"),
        ("POST", submit, json.dumps({"job": {**desc, "environment": []}}).encode(), 400,
         "Environment is missing"),
        ("POST", submit, b"{" + b" " * (2 * MAX_BODY) + b"}", 413, ""),
        ("GET", f"{V}/job/..%2F..%2Fetc%2Fpasswd", None, 404, "Invalid job id"),
        ("GET", f"{V}/job/1;rm", None, 404, "Invalid job id"),
        ("GET", f"{V}/node/..%2Fx", None, 404, "Invalid node name"),
        ("DELETE", f"{V}/job/1?signal=SIGBOGUS", None, 400, "Invalid signal"),
        ("GET", f"{V}/jobs?color=red", None, 400, "Unknown query parameter"),
        ("GET", f"{V}/jobs?update_time=soon", None, 400, "integer"),
        ("GET", "/slurm/v0.0.39/jobs", None, 404, "openapi"),
        ("PUT", f"{V}/jobs", None, 405, ""),
    ]  # fmt: skip
    for method, path, body, wanted, words in cases:
        status, text = rest.raw(method, path, body)
        reply = json.loads(text)
        assert status == wanted, (method, path, status, reply)
        assert reply["errors"] and words in json.dumps(reply["errors"]), (path, reply)
        assert b"Traceback" not in text
    status, _ = rest.call("GET", f"{V}/ping")
    assert status == 200  # still serving


def test_restd_counts_its_requests(gateway: tuple[Cluster, Rest]) -> None:
    _, rest = gateway
    for _ in range(3):
        rest.call("GET", f"{V}/partitions")
    status, text = rest.raw("GET", "/metrics", headers={})
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(text.decode())}
    counts = {
        (s.labels["route"], s.labels["status"]): s.value
        for s in families["corral_restd_requests"].samples
        if s.name.endswith("_total")
    }
    assert counts[(f"{V}/partitions", "200")] >= 3
    assert any(
        s.labels.get("route") == f"{V}/partitions"
        for s in families["corral_restd_request_parse_seconds"].samples
    )


def _certificate(directory: Path) -> tuple[str, str]:
    cert, key = str(directory / "cert.pem"), str(directory / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_https_only_with_a_certificate_and_a_unix_socket(
    gateway: tuple[Cluster, Rest], tmp_path: Path
) -> None:
    cluster, rest = gateway
    cert, key = _certificate(tmp_path)
    url = cluster.start_restd("--tls-cert", cert, "--tls-key", key)
    trusting = ssl.create_default_context(cafile=cert)
    status, reply = Rest(url, rest.token, context=trusting).call("GET", f"{V}/ping")
    assert status == 200 and reply["pings"][0]["pinged"] == "UP"
    plain = Rest(url.replace("https:", "http:"), rest.token)
    with pytest.raises((ConnectionError, OSError)):
        plain.call("GET", f"{V}/ping")
    local = cluster.start_restd(socket=str(tmp_path / "restd.sock"))
    status, reply = Rest(local, rest.token).call("GET", f"{V}/ping")
    assert status == 200


def test_a_gpu_job_submitted_with_tres_fields_shows_them(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Issue 18: the GPU fields of a REST description are sbatch's options, and the
    job's record shows them as scontrol does; sbatch's refusals are the gateway's."""
    cluster = make_cluster(
        nodes=2, settings=("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:2"), start=False
    )
    (cluster.dir / "gres.conf").write_text(f"Name=gpu File={cluster.dir}/gpu[0-1]\n")
    cluster.start()
    rest = Rest(cluster.start_restd(), token_for(cluster, "root"))
    gpus = {
        "tres_per_job": "gres/gpu:3",
        "memory_per_tres": "gres/gpu:100",
        "tres_bind": "gres/gpu:closest",
    }
    status, reply = rest.call("POST", f"{V}/job/submit", {"job": job_desc(cluster, **gpus)})
    assert status == 200, reply
    job = reply["job_id"]
    cluster.wait_state(job, {"RUNNING"}, timeout=20)
    status, reply = rest.call("GET", f"{V}/job/{job}")
    shown = reply["jobs"][0]
    assert (shown["tres_per_job"], shown["memory_per_tres"], shown["tres_bind"]) == (
        "gres/gpu:3",
        "gres/gpu:100",
        "gpu:closest",
    )
    assert shown["node_count"]["number"] == 2  # three GPUs spread over two nodes
    assert "TresPerJob=gres/gpu:3" in cluster.run("scontrol", "show", "job", str(job)).stdout
    refused = job_desc(cluster, tres_per_socket="gres/gpu:1")
    status, reply = rest.call("POST", f"{V}/job/submit", {"job": refused})
    assert status == 400
    assert "--gpus-per-socket option requires --sockets-per-node" in json.dumps(reply["errors"])
