"""corral-restd: start-up, listening and shutdown. No logic lives here.

    corral-restd [-f slurm.conf] [--tls-cert F --tls-key F] [--max-body N] [LISTEN ...]

LISTEN is ``host:port`` or ``unix:/path`` (slurmrestd's forms); by default
``127.0.0.1:6820``, slurmrestd's port. With a certificate and key every
listener serves HTTPS only. The gateway needs the cluster key (``corral.key``
beside slurm.conf), as a node agent does: it signs calls for the users whose
tokens it accepts. It refuses to run as root, as slurmrestd does, unless
``SLURMRESTD_SECURITY=disable_user_check`` (``restd/identity.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import ssl
import sys

import uvloop
from aiohttp import web

from corral import __version__, auth, grpctls, oomscore
from corral.config import ConfigError, SlurmConfig, default_path, load
from corral.sdnotify import Notifier
from restd.app import Gateway, build_app
from restd.controller import Controller
from restd.identity import refusal

log = logging.getLogger("corral.restd")

DEFAULT_LISTEN = "127.0.0.1:6820"
DEFAULT_MAX_BODY = 16 << 20
#: Longest request line or header line (aiohttp's own default is 8 KiB).
MAX_LINE = 1 << 20


def _tls(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if not cert and not key:
        return None
    if not cert or not key:
        raise ValueError("--tls-cert and --tls-key go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def _sites(
    runner: web.AppRunner, listen: list[str], tls: ssl.SSLContext | None
) -> list[web.BaseSite]:
    sites: list[web.BaseSite] = []
    for item in listen:
        if item.startswith("unix:"):
            path = item[len("unix:") :]
            if os.path.exists(path):
                os.unlink(path)
            sites.append(web.UnixSite(runner, path, ssl_context=tls))
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"cannot listen on {item!r}: give host:port or unix:/path")
        sites.append(
            web.TCPSite(runner, host.strip("[]") or "127.0.0.1", int(port), ssl_context=tls)
        )
    return sites


async def serve(
    conf: SlurmConfig,
    keys: auth.Keys,
    ttl: int,
    listen: list[str],
    tls: ssl.SSLContext | None,
    max_body: int,
    notifier: Notifier,
) -> None:
    receiver = auth.controller_receiver(conf.cluster_name)
    controller = Controller(conf.active_targets, keys.signer, receiver, conf.tls, ttl)
    proxies = frozenset({"root", conf.slurm_user})
    gateway = Gateway(controller, keys.jwt, conf.cluster_name, proxies, max_body)
    # aiohttp answers a request line or header past its limits itself, in plain
    # text; these are high enough that any such request reaches the envelope.
    runner = web.AppRunner(
        build_app(gateway), access_log=None, max_line_size=MAX_LINE, max_field_size=MAX_LINE
    )
    await runner.setup()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stopping.set)
    try:
        for site in _sites(runner, listen, tls):
            await site.start()
            log.info("serving %s on %s", "HTTPS" if tls else "HTTP", site.name)
        notifier.ready(f"serving {', '.join(listen)}")
        await stopping.wait()
        notifier.stopping()
    finally:
        await runner.cleanup()
        await controller.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="corral-restd", description="Corral's Slurm-compatible REST gateway"
    )
    parser.add_argument("-f", dest="config", help="slurm.conf (default: SLURM_CONF)")
    parser.add_argument("--tls-cert", help="certificate (PEM): serve HTTPS only")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")
    parser.add_argument(
        "--max-body",
        type=int,
        default=DEFAULT_MAX_BODY,
        help=f"largest request body in bytes (default {DEFAULT_MAX_BODY})",
    )
    parser.add_argument("-v", action="count", default=0, help="more logging")
    parser.add_argument("-V", "--version", action="version", version=f"corral {__version__}")
    parser.add_argument("listen", nargs="*", help=f"host:port or unix:/path ({DEFAULT_LISTEN})")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.DEBUG if args.v else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    refused = refusal(os.getuid(), os.getgid(), os.environ)
    if refused is not None:  # before anything is read, as slurmrestd checks
        print(f"corral-restd: fatal: {refused}", file=sys.stderr)
        sys.exit(1)
    oomscore.protect("corral-restd")
    notifier = Notifier.from_environment()
    try:
        conf = load(args.config or default_path())
        keys, ttl = auth.settings_keys(conf.path, dict(conf.settings))
        tls = _tls(args.tls_cert, args.tls_key)
    except (ConfigError, auth.AuthError, ValueError, OSError, ssl.SSLError) as exc:
        print(f"corral-restd: fatal: {exc}", file=sys.stderr)
        sys.exit(1)
    try:
        uvloop.run(
            serve(conf, keys, ttl, args.listen or [DEFAULT_LISTEN], tls, args.max_body, notifier)
        )
    except (OSError, ValueError, grpctls.TlsError) as exc:
        print(f"corral-restd: fatal: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
