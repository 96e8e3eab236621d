"""corral-dbd: start-up, wiring and shutdown. No logic lives here."""

from __future__ import annotations

import argparse
import asyncio
import logging
import pwd
import signal
import sys
import time

import grpc
import uvloop
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from corral import __version__, auth, grpcservice, grpctls, oomscore
from corral.confsyntax import ConfigError
from corral.confsyntax import default_path as slurm_conf_path
from corral.credentials import Verifier
from corral.sdnotify import Notifier
from dbd import schema
from dbd.config import DbdConfig, default_path, load
from dbd.purge import purge_events, purge_jobs
from dbd.rollup import rollup
from dbd.service import AccountingService
from dbd.storage import Storage, engine_for

log = logging.getLogger("corral.dbd")

#: Seconds between usage rollups (sreport also rolls up before it reads).
ROLLUP_EVERY_S = 300.0


async def serve(conf: DbdConfig, url: str, keys: auth.Keys, ttl: int, notifier: Notifier) -> None:
    engine = engine_for(url)
    schema.upgrade(engine)
    log.info("database %s at schema %s", engine.url.render_as_string(), schema.head())
    slurm_uid = _slurm_uid(conf.slurm_user)
    server = grpc.aio.server(options=[("grpc.max_send_message_length", 256 << 20)])
    verifier = Verifier(keys.signer, auth.DBD_RECEIVER, ttl, vouchers={0, slurm_uid})
    service = AccountingService(Storage(engine), verifier, conf.private_data, slurm_uid)
    grpcservice.add_service(server, "Accounting", service)
    # Only controllers connect: they must show a certificate of the cluster's CA too.
    address = f"{conf.dbd_addr}:{conf.dbd_port}"
    port = grpctls.add_port(server, address, conf.tls, "dbd", require_client_cert=True)
    if port == 0:
        raise SystemExit(f"corral-dbd: fatal: cannot listen on {conf.dbd_addr}:{conf.dbd_port}")
    await server.start()
    log.info(
        "corral-dbd %s: gRPC%s on %s:%d",
        __version__,
        " (mutual TLS)" if conf.tls.enabled else " (plaintext: TLSType=tls/none)",
        conf.dbd_addr,
        port,
    )
    rolling = asyncio.create_task(_roll_up(engine, conf.purge_job_after, conf.purge_event_after))
    stopping = asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, stopping.set)
    notifier.ready(f"serving accounting on {conf.dbd_addr}:{port}")
    await stopping.wait()
    notifier.stopping()
    log.info("shutting down")
    rolling.cancel()
    await server.stop(grace=1.0)
    engine.dispose()


async def _roll_up(engine: Engine, purge_job_after: int, purge_event_after: int) -> None:
    """Roll up usage, then apply PurgeJobAfter and PurgeEventAfter, at start and every
    ``ROLLUP_EVERY_S`` (cancel to stop): the rollups keep the usage of purged records."""
    while True:
        try:
            hours = await asyncio.to_thread(rollup, engine, int(time.time()))
            purged = await asyncio.to_thread(purge_jobs, engine, int(time.time()), purge_job_after)
            if purged:
                log.info("PurgeJobAfter: %d job records purged", purged)
            events = await asyncio.to_thread(
                purge_events, engine, int(time.time()), purge_event_after
            )
            if events:
                log.info("PurgeEventAfter: %d node events purged", events)
        except DBAPIError as exc:  # the database is away: next time
            log.warning("usage rollup: %s", exc.orig)
        except Exception:  # a bug must not stop the rollups (nor the daemon)
            log.exception("usage rollup failed")
        else:
            if hours:
                log.info("usage rollup: %d hours rolled up", hours)
        await asyncio.sleep(ROLLUP_EVERY_S)


def _slurm_uid(name: str) -> int:
    """The uid of SlurmUser (an administrator of accounting data); root if unknown."""
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        log.warning("SlurmUser=%s: no such user; root alone administers", name)
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="corral-dbd", description="Corral's accounting daemon")
    parser.add_argument("-f", dest="config", default=None, help="slurmdbd.conf path")
    parser.add_argument(
        "--database", default=None, help="a SQLAlchemy URL instead of the Storage* settings"
    )
    parser.add_argument("-D", action="store_true", help="run in the foreground (always true)")
    parser.add_argument("-v", action="count", default=0, help="more logging")
    parser.add_argument("-V", "--version", action="version", version=f"corral {__version__}")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.DEBUG if args.v > 1 else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    oomscore.protect("corral-dbd")
    notifier = Notifier.from_environment()
    path = args.config or default_path(slurm_conf_path())
    try:
        conf = load(path)
        # Not AuthAltParameters: dbd checks no JWT, and its key file may live elsewhere.
        settings = {
            "AuthType": conf.auth_type,
            "AuthInfo": conf.auth_info,
            "SlurmUser": conf.slurm_user,
        }
        keys, ttl = auth.settings_keys(path, settings)
    except (ConfigError, auth.AuthError, ValueError) as exc:
        print(f"corral-dbd: fatal: {exc}", file=sys.stderr)
        sys.exit(1)
    for warning in conf.warnings:
        log.warning("%s", warning)
    uvloop.install()
    try:
        asyncio.run(serve(conf, args.database or conf.database_url, keys, ttl, notifier))
    except OperationalError as exc:
        print(f"corral-dbd: fatal: cannot reach the database: {exc.orig}", file=sys.stderr)
        sys.exit(1)
    except grpctls.TlsError as exc:
        print(f"corral-dbd: fatal: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
