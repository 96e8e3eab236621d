"""corral-controller: start-up, wiring and shutdown. No logic lives here."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import grpc
import uvloop

from controller import ctldaddr, ctldline, primaryprog
from controller.accounting import Delivery
from controller.agentlink import AgentLink
from controller.framed import FramedServer, cluster_lookup
from controller.grpcface import GrpcController
from controller.journal import Journal, JournalError, JournalWriteError, StateJournal
from controller.loop import SchedulerLoop
from controller.metrics import ControllerCollector, metrics_address, serve_metrics
from controller.moves import Mover
from controller.service import Handlers
from controller.store import JobStore
from controller.triggerrun import TriggerRunner
from corral import (
    __version__,
    auth,
    authalt,
    grpcservice,
    grpctls,
    oomscore,
    ratelimit,
    statestorage,
)
from corral.client import socket_path
from corral.clusterroute import ClusterRoutes, ControllerCalls
from corral.config import ConfigError, SlurmConfig, default_path, load
from corral.credentials import Verifier
from corral.ratelimit import Gate
from corral.sdnotify import Notifier

if TYPE_CHECKING:
    from controller.lease import Lease

log = logging.getLogger("corral.controller")

GRPC_OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


def setup_logging(verbose: int) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose > 1 else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


async def open_journal(
    conf: SlurmConfig, index: int, verifier: Verifier, keys: auth.Keys, ttl: int, started: bool
) -> tuple[StateJournal, Lease | None] | None:
    """The journal StateStorageType selects; in a database, once this controller
    holds the cluster's lease (in standby while another does; the primary asks a
    serving backup to hand control back when it has just ``started``, not after it
    handed control over itself: docs/ha.md). None when SIGTERM or SIGINT came first."""
    if not conf.state_storage.shared:
        return Journal(conf.state_save_location), None
    # Imported here: a controller on SQLite never loads SQLAlchemy.
    from controller.dbjournal import DatabaseJournal
    from controller.lease import acquire
    from controller.standby import Standby, reclaim
    from controller.warmstate import follow

    os.makedirs(conf.state_save_location, mode=0o755, exist_ok=True)  # the clients' socket
    line = conf.slurmctld_hosts[index][0]
    journal = DatabaseJournal(conf.state_storage, conf.cluster_name, line=line)
    where = socket_path(conf.state_save_location, index)
    standby = Standby(conf, index, verifier, ratelimit.from_config(conf), where)
    await standby.start()
    if started and index == 0 and len(conf.slurmctld_hosts) > 1:
        await reclaim(conf, keys.signer, ttl)
    running = asyncio.get_running_loop()
    following = asyncio.ensure_future(follow(journal))  # a warm standby: docs/ha.md
    taking = asyncio.ensure_future(acquire(journal.lease))
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, taking.cancel)
    try:
        await taking
    except asyncio.CancelledError:
        journal.close()
        return None
    finally:
        following.cancel()
        await standby.stop()
    return journal, journal.lease


async def serve(
    conf: SlurmConfig, keys: auth.Keys, ttl: int, notifier: Notifier, index: int, started: bool
) -> bool:
    """Serve until stopped (``started``: the process has just started); True when
    this controller handed the lease to another (scontrol takeover) or was fenced
    out of it (another took it while this one was cut off), and waits in standby
    again, as a slurmctld that is no longer primary does."""
    # One verifier for the Controller service and agents' hellos: one replay cache.
    verifier = Verifier(
        keys.signer,
        auth.controller_receiver(conf.cluster_name),
        ttl,
        vouchers=auth.daemon_uids(conf.slurm_user),
    )
    opened = await open_journal(conf, index, verifier, keys, ttl, started)
    if opened is None:
        log.info("stopped in standby")
        return False
    journal, lease = opened
    began = time.monotonic()
    store = JobStore(conf, journal)
    store.load(time.monotonic())
    if lease is not None:
        log.info("state loaded in %.2f s: serving", time.monotonic() - began)
    stopping = asyncio.Event()
    handed: list[int] = []  # scontrol takeover: the line the lease goes to
    fenced: list[bool] = []  # a write or a renewal found another controller holding it

    def lost() -> None:
        fenced.append(True)
        stopping.set()

    store.durable.lost = lost
    primary_on = asyncio.create_task(primaryprog.run(conf.hooks, serving=True))
    link = AgentLink(store, keys.seal, verifier, lambda: loop.kick())
    store.dispatch_to(link.dispatch)  # the one sender of what transitions cause
    handlers = Handlers(store, link, lambda: loop.kick(), stopping.set)
    handlers.ctld_index = index
    if lease is not None:

        def hand_over(to: int) -> None:
            handed.append(to)
            stopping.set()

        handlers.hand_over = hand_over
    loop = SchedulerLoop(store, link)
    delivery = Delivery(store, keys.signer, ttl) if conf.accounting.enabled else None
    handlers.accounting = delivery
    if delivery is not None:
        delivery.control_host = conf.slurmctld_hosts[index][1]
    handlers.scheduler_stats = loop.stats
    handlers.jwt_key = keys.jwt
    for warning in authalt.from_settings(dict(conf.settings)).warnings:
        log.warning("%s", warning)  # slurmctld's: the limit is not enforced

    # Bounded as the Unix sockets are (corral/ratelimit.py): requests are read up to what a
    # submission at its ceilings needs, checked against the message's length before it is
    # parsed; a connection must finish its handshake within MessageTimeout; calls in flight
    # are capped at conmgr_max_connections beyond one stream per node agent.
    limits = ratelimit.from_config(conf)
    bounded = [
        ("grpc.max_receive_message_length", limits.max_frame),
        ("grpc.server_handshake_timeout_ms", int(limits.read_timeout * 1000)),
    ]
    controller = GrpcController(handlers, verifier, Gate(limits))

    def grpc_server(*options: tuple[str, int]) -> grpc.aio.Server:
        made = grpc.aio.server(
            options=[*GRPC_OPTIONS, *bounded, *options],
            maximum_concurrent_rpcs=limits.max_connections + len(conf.nodes),
        )
        grpcservice.add_service(made, "Controller", controller)
        grpcservice.add_service(made, "AgentLink", link)
        return made

    server = grpc_server()
    address = conf.controller_targets[index]
    port = grpctls.add_port(server, address, conf.tls, "ctld")
    if port == 0:
        raise SystemExit(f"corral-controller: fatal: cannot listen on {address}")
    await server.start()
    log.info(
        "corral-controller %s for cluster %s: gRPC%s on %s",
        __version__,
        conf.cluster_name,
        " (TLS)" if conf.tls.enabled else " (plaintext: TLSType=tls/none)",
        address,
    )
    calls = ControllerCalls(keys.signer, conf.tls, ttl)
    routes = ClusterRoutes(conf.cluster_name, cluster_lookup(handlers), calls)
    framed = FramedServer(handlers, socket_path(conf.state_save_location, index), limits, routes)
    await framed.start()
    try:
        where = metrics_address(conf)
    except ValueError as exc:
        raise SystemExit(f"corral-controller: fatal: {exc}") from None
    exporter = None
    if where is not None:
        collector = ControllerCollector(
            store,
            loop.stats,
            lambda: handlers.rpc_stats,
            lambda: delivery.backlog if delivery is not None else 0,
            link.stats,
        )
        try:
            exporter = await serve_metrics(collector, *where)
        except OSError as exc:
            where_text = f"{where[0]}:{where[1]}"
            raise SystemExit(f"corral-controller: fatal: metrics on {where_text}: {exc}") from None

    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, stopping.set)
    running.add_signal_handler(signal.SIGHUP, _reconfigure(handlers))
    cycle = asyncio.create_task(loop.run())
    vip = conf.ctld_addr_target
    addressed = (
        asyncio.create_task(
            ctldaddr.listen(vip, conf.tls, lambda: grpc_server(("grpc.so_reuseport", 0)))
        )
        if vip
        else None
    )
    triggers = asyncio.create_task(TriggerRunner(store).run())
    moves = asyncio.create_task(Mover(store, calls, cluster_lookup(handlers)).run())
    accounting = (
        [asyncio.create_task(delivery.run()), asyncio.create_task(delivery.follow())]
        if delivery is not None
        else []
    )
    renewing = None
    if lease is not None:
        from controller.lease import keep

        renewing = asyncio.create_task(keep(lease, lost))
    notifier.ready(f"serving cluster {conf.cluster_name} on {address}")
    await stopping.wait()
    notifier.stopping()
    log.info("shutting down")
    cycle.cancel()
    if addressed is not None:
        addressed.cancel()
    triggers.cancel()
    moves.cancel()
    for task in accounting:
        task.cancel()
    if renewing is not None:
        renewing.cancel()
    if delivery is not None:
        await delivery.close()
    await framed.close()
    await calls.close()
    if exporter is not None:
        exporter.close()
    if addressed is not None:
        await asyncio.gather(addressed, return_exceptions=True)  # its server stopped
    await server.stop(grace=0.2)  # agent streams never end by themselves
    try:
        await store.flush()
    except JournalWriteError as exc:
        log.error(
            "journal: %s not written at shutdown (%s): none of it was acknowledged",
            journal.path,
            exc.reason,
        )
    if handed and lease is not None:
        await _hand_over(lease, conf.slurmctld_hosts[handed[0]][0])
    journal.close()  # in a database, the lease goes back with it
    await primary_on  # so that the programs run in order
    await primaryprog.run(conf.hooks, serving=False)
    if fenced:
        log.info("fenced out of the lease: this controller waits in standby")
    return bool(handed or fenced)


async def _hand_over(lease: Lease, line: str) -> None:
    """The state saved, the lease goes to SlurmctldHost ``line``'s controller."""
    from sqlalchemy.exc import DBAPIError

    try:
        await asyncio.to_thread(lease.hand_over, line)
    except DBAPIError as exc:  # released at close instead: whichever standby is first
        log.warning("lease: not handed to %s: %s", line, exc.orig)
    else:
        log.info("lease: handed to %s; this controller waits in standby", line)


def _reconfigure(handlers: Handlers) -> Callable[[], None]:
    def reload() -> None:
        try:
            handlers.reconfigure()
        except Exception as exc:
            log.error("%s", exc)

    return reload


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="corral-controller", description="Corral's cluster controller"
    )
    parser.add_argument(
        "-f", dest="config", default=None, help="slurm.conf path (default $SLURM_CONF)"
    )
    parser.add_argument("-D", action="store_true", help="run in the foreground (always true)")
    parser.add_argument("-v", action="count", default=0, help="more logging")
    parser.add_argument("-V", "--version", action="version", version=f"corral {__version__}")
    args = parser.parse_args()
    setup_logging(args.v)
    oomscore.protect("corral-controller")
    notifier = Notifier.from_environment()
    try:
        conf = load(args.config or default_path())
    except ConfigError as exc:
        print(f"corral-controller: fatal: {exc}", file=sys.stderr)
        sys.exit(1)
    for warning in conf.warnings:
        log.warning("%s", warning)
    try:
        statestorage.check_controllers(conf.path, conf.slurmctld_hosts, conf.state_storage)
    except ConfigError as exc:
        print(f"corral-controller: fatal: {exc}", file=sys.stderr)
        sys.exit(1)
    if not os.access(conf.hooks.mail_prog, os.X_OK):  # slurmctld's word; mail is only logged
        log.warning("Configured MailProg is invalid: %s", conf.hooks.mail_prog)
    try:
        ratelimit.from_config(conf)
        keys, ttl = auth.settings_keys(conf.path, dict(conf.settings))
    except (auth.AuthError, ValueError) as exc:
        print(f"corral-controller: fatal: {exc}", file=sys.stderr)
        sys.exit(1)
    try:
        index = ctldline.own_index(conf.path, conf.slurmctld_hosts, os.environ)
    except ConfigError as exc:
        print(f"corral-controller: fatal: {exc}", file=sys.stderr)
        sys.exit(1)
    uvloop.install()
    try:
        started = True
        while asyncio.run(serve(conf, keys, ttl, notifier, index, started)):
            started = False  # handed over (scontrol takeover) or fenced: in standby again
    except (JournalError, grpctls.TlsError) as exc:
        print(f"corral-controller: fatal: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
