"""corral-restd's pure parts: the schema checks, the token headers, job
descriptions, the listing's split of the Jobs reply, and the OpenAPI document."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.options import HONOURED, REFUSED, WARNED
from corral import errors, tokens
from corral.auth import Keys
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb
from restd.api import OPERATIONS, SCHEMAS, job_id, signal_number
from restd.auth import AuthFailure, Verified, authenticate
from restd.jobfields import BY_NAME, FIELDS
from restd.joblist import JobListing, split_reply
from restd.jobs import descriptions, spec_from_description, updates_from_description
from restd.openapi import document
from restd.schema import validate

KEY = Keys.derive(b"k" * 64).jwt
NOW = int(time.time())  # PyJWT refuses a token issued in its future
SUBMIT = next(op for op in OPERATIONS if op.path == "job/submit").body


def _check(body: Any) -> list[str]:
    assert SUBMIT is not None
    return validate(SUBMIT, body, SCHEMAS, "body")


def test_the_submit_schema_refuses_unknown_fields_and_wrong_types() -> None:
    good = {"job": {"script": "#!/bin/sh\n", "environment": ["A=1"], "time_limit": 5}}
    assert _check(good) == []
    assert _check({**good, "job": {**good["job"], "time_limit": {"set": True, "number": 5}}}) == []
    assert _check({"job": {"tasks": "2"}}) == ["body.job.tasks: expected integer, got string"]
    assert _check({"job": {"tasks": True}}) == ["body.job.tasks: expected integer, got boolean"]
    assert _check({"job": {"colour": "red"}}) == ["body.job.colour: unknown field"]
    assert _check({"job": {"tasks": 0}}) == ["body.job.tasks: 0 is out of range"]
    assert _check({"jobs": [{"tasks": "1"}]}) == [
        "body.jobs[0].tasks: expected integer, got string"
    ]
    assert _check({"jobs": {"tasks": 1}}) == ["body.jobs: expected array, got object"]
    assert _check([]) == ["body: expected object, got array"]
    assert _check({"job": {"time_limit": "soon"}}) == [
        "body.job.time_limit: does not match any allowed form"
    ]


def test_tokens_in_either_header_and_what_is_refused() -> None:
    token = tokens.mint(KEY, "alice", NOW)
    proxies = frozenset({"root"})
    assert authenticate({"X-SLURM-USER-TOKEN": token}, Verified(KEY), NOW, proxies) == "alice"
    assert (
        authenticate({"Authorization": f"Bearer {token}"}, Verified(KEY), NOW, proxies) == "alice"
    )
    root = tokens.mint(KEY, "root", NOW)
    acting = {"X-SLURM-USER-TOKEN": root, "X-SLURM-USER-NAME": "bob"}
    assert authenticate(acting, Verified(KEY), NOW, proxies) == "bob"
    refused = [
        ({}, 401),
        ({"X-SLURM-USER-TOKEN": token, "Authorization": f"Bearer {token}"}, 401),
        ({"Authorization": f"Basic {token}"}, 401),
        ({"X-SLURM-USER-TOKEN": tokens.mint(b"x" * 32, "alice", NOW)}, 401),
        ({"X-SLURM-USER-TOKEN": tokens.mint(KEY, "alice", NOW - 3600, 60)}, 401),
        ({"X-SLURM-USER-TOKEN": token, "X-SLURM-USER-NAME": "bob"}, 403),
    ]
    for headers, status in refused:
        with pytest.raises(AuthFailure) as failure:
            authenticate(headers, Verified(KEY), NOW, proxies)
        assert failure.value.status == status, headers


def test_a_verified_token_is_remembered_until_it_expires() -> None:
    verified = Verified(KEY)
    token = tokens.mint(KEY, "alice", NOW, lifespan=60)
    assert verified.user_of(token, NOW) == "alice"
    assert verified.user_of(token, NOW + 59) == "alice"
    with pytest.raises(tokens.TokenError, match="expired"):
        verified.user_of(token, NOW + 60)


def test_a_description_becomes_the_spec_sbatch_would_send() -> None:
    desc = {
        "environment": ["PATH=/bin", "EMPTY="],
        "current_working_directory": "/work",
        "standard_output": "out-%j.txt",
        "nodes": "2-4",
        "partition": "a,b",
        "time_limit": {"set": False, "infinite": True, "number": 0},
        "memory_per_node": {"set": True, "number": 1024},
        "tres_per_node": "gres/gpu:2",
        "required_nodes": ["n1", "n2"],
        "exclusive": ["true"],
        "open_mode": ["APPEND"],
    }
    spec = spec_from_description(desc, "#!/bin/sh\ntrue\n", "/home/x", "restd", [])
    assert spec["environment"] == {"PATH": "/bin", "EMPTY": ""}
    assert (spec["work_dir"], spec["std_out"]) == ("/work", "/work/out-%j.txt")
    assert (spec["min_nodes"], spec["max_nodes"]) == (2, 4)
    assert spec["partitions"] == ["a", "b"]
    assert (spec["time_limit"], spec["mem_per_node"]) == (-1, 1024)
    assert (spec["gres"], spec["req_nodes"], spec["exclusive"]) == ("gpu:2", "n[1-2]", True)
    assert spec["open_mode"] == "append"
    home = spec_from_description({"environment": ["A=1"]}, "#!/bin/sh\n", "/home/x", "r", [])
    assert home["work_dir"] == "/home/x"


@pytest.mark.parametrize(
    ("desc", "script", "code"),
    [
        ({"environment": ["A=1"]}, "", errors.ESLURM_JOB_SCRIPT_MISSING),
        ({"environment": ["A=1"]}, "echo hi", errors.EINVAL),
        ({}, "#!/bin/sh\n", errors.ESLURM_ENVIRONMENT_MISSING),
        ({"environment": ["NOEQUALS"]}, "#!/bin/sh\n", errors.EINVAL),
        ({"environment": ["A=1"], "nodes": "4-2"}, "#!/bin/sh\n", errors.ESLURM_INVALID_NODE_COUNT),
        ({"environment": ["A=1"], "required_nodes": "n[1-"}, "#!/bin/sh\n",
         errors.ESLURM_INVALID_NODE_NAME),
        # Slurm 22.05's slurmrestd: error 2014 for a threads_per_core of 0
        ({"environment": ["A=1"], "threads_per_core": {"set": True, "number": 0}},
         "#!/bin/sh\n", errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE),
    ],
)  # fmt: skip
def test_descriptions_slurm_refuses(desc: dict[str, Any], script: str, code: int) -> None:
    with pytest.raises(SlurmError) as refused:
        spec_from_description(desc, script, "/home/x", "restd", [])
    assert refused.value.code == code


#: What a client sends that Corral cannot do (and once took in silence, or took for
#: something else: exclusive=user used to mean whole nodes).
REFUSED_FIELDS = [
    {"cpu_binding": "map_cpu:0,1"},
    {"distribution": "cyclic"},
    {"mcs_label": "x"},
    {"tasks_per_core": 1},
    {"contiguous": True},
    {"exclusive": ["user"]},
    {"exclusive": ["topo"]},
    {"kill_warning_signal": "USR1"},
    {"tres_per_node": "gres/gpu:1,cpu=4"},
]


@pytest.mark.parametrize("field", REFUSED_FIELDS, ids=lambda f: next(iter(f)))
def test_fields_that_could_change_the_outcome_are_refused(field: dict[str, Any]) -> None:
    desc = {"environment": ["A=1"], **field}
    assert validate(SCHEMAS["job_desc_msg"], desc, SCHEMAS, "job") == []
    with pytest.raises(SlurmError, match=r"^job\.\w+(=\S+)? is not supported: ") as refused:
        spec_from_description(desc, "#!/bin/sh\n", "/home/x", "restd", [])
    assert refused.value.code == errors.ESLURM_NOT_SUPPORTED


def test_socket_counts_are_sbatchs_fields() -> None:
    """``sockets_per_node``, ``cores_per_socket`` and ``threads_per_core`` fill the
    fields sbatch's ``-B 2:3:1`` fills, and no task count (22.05's slurmrestd sets
    none: NumTasks=1 for ``cores_per_socket=2, sockets_per_node=1``)."""
    counts = {
        "sockets_per_node": {"set": True, "number": 2},
        "cores_per_socket": {"set": True, "number": 3},
        "threads_per_core": 1,
    }
    spec = spec_from_description({"environment": ["A=1"], **counts}, "#!/bin/sh\n", "/", "", [])
    got = {key: spec.get(key) for key in (*counts, "num_tasks")}
    assert got == {
        "sockets_per_node": 2,
        "cores_per_socket": 3,
        "threads_per_core": 1,
        "num_tasks": None,
    }


def test_fields_that_cannot_change_the_outcome_are_warned_about() -> None:
    warnings: list[str] = []
    desc = {"environment": ["A=1"], "profile": ["TASK"], "wckey": "w", "name": "j"}
    spec = spec_from_description(desc, "#!/bin/sh\n", "/home/x", "restd", warnings)
    assert spec["name"] == "j"
    assert warnings == [
        "job.profile has no effect: no profiling data is gathered",
        "job.wckey has no effect: WCKeys are not tracked",
    ]


def test_mail_fields_are_taken_in_slurmrestds_flag_names() -> None:
    desc = {"environment": ["A=1"], "mail_type": ["END", "TIME=90%"], "mail_user": "a@b"}
    spec = spec_from_description(desc, "#!/bin/sh\n", "/home/x", "restd", [])
    assert (spec["mail_type"], spec["mail_user"]) == ("END,TIME_LIMIT_90", "a@b")
    with pytest.raises(SlurmError, match="Invalid --mail-type specification"):
        spec_from_description({**desc, "mail_type": ["SOON"]}, "#!/bin/sh\n", "/", "r", [])


def test_exclusive_false_oversubscribes_and_open_mode_is_one_word() -> None:
    desc = {"environment": ["A=1"], "exclusive": ["false"], "open_mode": ["TRUNCATE"]}
    spec = spec_from_description(desc, "#!/bin/sh\n", "/home/x", "restd", [])
    assert (spec["oversubscribe"], spec["open_mode"], "exclusive" in spec) == (
        True,
        "truncate",
        False,
    )
    for bad in ({"exclusive": ["true", "false"]}, {"open_mode": ["APPEND", "TRUNCATE"]}):
        with pytest.raises(SlurmError, match="exclude each other"):
            spec_from_description({"environment": ["A=1"], **bad}, "#!/bin/sh\n", "/", "r", [])


def test_every_field_is_classified_and_the_schema_is_the_table() -> None:
    assert set(SCHEMAS["job_desc_msg"]["properties"]) == set(BY_NAME)
    for row in FIELDS:
        assert row.use in (HONOURED, WARNED, REFUSED), row
        assert row.use == HONOURED or row.note, row
        assert not row.update or row.use == HONOURED, row


def test_updates_are_scontrols_words() -> None:
    updates, hold = updates_from_description(
        {"time_limit": 30, "comment": "c", "requeue": False, "hold": True}
    )
    assert updates == {"TimeLimit": "30", "Comment": "c", "Requeue": "0"}
    assert hold == "hold"
    assert updates_from_description({"time_limit": {"set": False, "infinite": True}})[0] == {
        "TimeLimit": "UNLIMITED"
    }
    with pytest.raises(SlurmError, match="Update of tasks is not supported"):
        updates_from_description({"tasks": 2})
    with pytest.raises(SlurmError, match="Update of mail_type, network is not supported"):
        updates_from_description({"mail_type": ["END"], "network": "x"})
    assert updates_from_description({"licenses": "fluent:2"})[0] == {"Licenses": "fluent:2"}


def test_ids_and_signals_as_paths_and_queries_give_them() -> None:
    # 7+1 stays a component: as 7_1 it would name an array task the het job does not have.
    assert [job_id(t) for t in ("7", "7_3", "7+1")] == ["7", "7_3", "7+1"]
    for bad in ("", "x", "7_", "../7", "7;1", "99999999999"):
        with pytest.raises(SlurmError):
            job_id(bad)
    assert [signal_number(s) for s in ("SIGUSR1", "usr1", "10", "KILL")] == [10, 10, 10, 9]
    with pytest.raises(SlurmError):
        signal_number("SIGNOPE")


@given(
    st.lists(
        st.builds(
            pb.JobInfo,
            job_id=st.integers(0, 2**32 - 1),
            name=st.text(max_size=300),
            state=st.sampled_from(["PENDING", "RUNNING", "COMPLETED"]),
            time_limit=st.integers(-1, 2**40),
            exit_status=st.integers(0, 2**15),
        ),
        max_size=20,
    ),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
)
def test_the_listing_splits_a_jobs_reply_as_protobuf_decodes_it(
    jobs: list[Any], now: int, last_update: int
) -> None:
    data = pb.JobsReply(jobs=jobs, now=now, last_update=last_update).SerializeToString()
    records, seen = split_reply(data)
    assert seen == last_update
    assert [pb.JobInfo.FromString(r) for r in records] == jobs
    listing = JobListing()
    first = listing.render(records)
    assert [r["job_id"] for r in first] == [j.job_id for j in jobs]
    assert listing.render(records) == first  # from the kept records


def test_the_openapi_document_has_every_operation_of_every_version() -> None:
    doc = document()
    ids = [spec["operationId"] for path in doc["paths"].values() for spec in path.values()]
    assert len(ids) == len(set(ids)) == sum(len(op.versions) for op in OPERATIONS)
    submit = doc["paths"]["/slurm/v0.0.42/job/submit"]["post"]
    assert submit["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/job_submit_req"
    }
    for name, schema in doc["components"]["schemas"].items():
        assert schema.get("type") == "object", name


def test_a_submission_gives_job_or_a_list_of_components() -> None:
    one, two = {"name": "a"}, {"name": "b"}
    assert descriptions({"job": one}) == [one]
    assert descriptions({"jobs": [one, two]}) == [one, two]
    for body in ({}, {"jobs": []}, {"job": one, "jobs": [two]}):
        with pytest.raises(SlurmError) as refused:
            descriptions(body)
        assert refused.value.code == errors.ESLURM_REST_INVALID_JOBS_DESC, body
    with pytest.raises(SlurmError, match=r"jobs\[1\]\.script: only the first component"):
        descriptions({"jobs": [one, {"script": "#!/bin/sh\n"}]})
