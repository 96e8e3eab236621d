"""A takeover end to end with a large state: two controllers on MariaDB (docs/ha.md),
``--jobs`` held jobs in the state, the primary killed with SIGKILL; timed from the
kill to the backup serving, with the backup's own figure for loading the state
(its log's ``state loaded in S s``).

The controllers are the integration tests' pair (tests/integration/hapair.py:
127.0.0.1 and 127.0.0.2, ``SlurmctldTimeout=3``, MariaDB at 127.0.0.1:3306 in a
database of its own, dropped afterwards). Run from another checkout's root with
``PYTHONPATH`` set to it to measure that version's takeover. Prints one JSON line.

    python bench/hatakeover.py [--jobs 10000]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.databases import fresh_state_database
from tests.integration.cluster import Cluster
from tests.integration.hapair import Controllers, ha_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as directory,
        fresh_state_database(Path(directory)) as storage,
    ):
        cluster = Cluster(Path(directory) / "c", nodes=2, settings=ha_settings(storage), tls=False)
        both = Controllers(cluster)
        try:
            both.start_cluster()
            spec = {"name": "held", "script": "#!/bin/sh\ntrue\n", "work_dir": directory}
            began = time.monotonic()
            with ThreadPoolExecutor(8) as pool:  # the journal commits them in groups
                list(
                    pool.map(
                        lambda _: both.client.call("Submit", {"spec": {**spec, "hold": True}}),
                        range(args.jobs),
                    )
                )
            submitted = time.monotonic() - began
            time.sleep(3)  # the standby's polls see the last batches
            both.kill(0)
            began = time.monotonic()
            assert both.wait_serving(60) == 1
            takeover = time.monotonic() - began
            loaded = re.findall(r"state loaded in ([0-9.]+) s", both.log(1).read_text())
            print(
                json.dumps(
                    {
                        "jobs": args.jobs,
                        "submitted_s": round(submitted, 1),
                        "kill_to_serving_s": round(takeover, 2),
                        "state_loaded_s": float(loaded[-1]),
                    }
                )
            )
        finally:
            cluster.stop()
            both.stop()


if __name__ == "__main__":
    main()
