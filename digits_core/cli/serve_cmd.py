"""``digits serve``: run the web UI and JSON API (and its job scheduler)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from flask import Flask
    from waitress.server import BaseWSGIServer, MultiSocketServer

logger = logging.getLogger(__name__)

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
#: Requests the production server answers at once (its thread pool).
DEFAULT_THREADS = 8
#: Connections the production server keeps open at once.
DEFAULT_MAX_CONNECTIONS = 1000
#: Seconds a connection may stay silent (a half-sent request included) before the server closes it.
DEFAULT_IDLE_TIMEOUT = 60.0


def register(subparsers: Any) -> None:
    """Add the ``serve`` command."""
    parser = subparsers.add_parser(
        "serve",
        help="run the web UI",
        description="Run the DIGITS web UI and JSON API over the jobs folder. Jobs run in background "
        "worker processes, which stop when the server stops or dies. Jobs whose process died are "
        "shown Aborted (model jobs can be resumed from their last snapshot); jobs another live "
        "process runs (a `digits train` in a shell) are left alone. Only the Host names it was "
        "bound for are answered, and only paths under the data roots are read.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=5000, help="port (default: 5000)")
    parser.add_argument(
        "--auth-token",
        default=None,
        metavar="TOKEN",
        help="require this token for every page and API call (default: $DIGITS_AUTH_TOKEN; none). "
        "Required when --host is not a loopback address, unless the jobs folder has user accounts (digits users)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host header is NAME (repeatable; always allowed: "
        "localhost, 127.0.0.1, [::1] and the --host address). Any other Host gets 400, "
        "which stops DNS-rebinding attacks",
    )
    parser.add_argument(
        "--data-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder whose files the web UI and API may read: dataset folders and lists, "
        "inference inputs, plugin path fields (repeatable; default: the current folder; the "
        "jobs folder always is one). Paths elsewhere get 400; the command line is not limited",
    )
    parser.add_argument(
        "--allow-url",
        action="append",
        default=[],
        metavar="PATTERN",
        help="let URLs typed in the web forms (DICOMweb server, S3 endpoint) reach PATTERN: an "
        "address or network (10.0.0.0/8), a host or host:port (* wildcards), or none (refuse "
        "every typed URL). Repeatable. Default: public addresses only; loopback, link-local and "
        "private ones are refused. The command line is not limited",
    )
    parser.add_argument(
        "--dicomweb-server",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="a DICOMweb server offered by name in the dataset form (repeatable); only these get "
        "the operator's $DIGITS_DICOMWEB_PASSWORD / $DIGITS_DICOMWEB_TOKEN, never a typed URL",
    )
    parser.add_argument(
        "--session-idle-minutes",
        type=float,
        default=480,
        metavar="MINUTES",
        help="with --auth-token: a browser login unused this long expires (default: 480)",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow a non-loopback --host without --auth-token: anyone who can reach the port "
        "can then run code on this machine (custom networks)",
    )
    parser.add_argument(
        "--max-dataset-jobs", type=int, default=2, metavar="N", help="dataset jobs that run at once (default: 2)"
    )
    parser.add_argument(
        "--max-training-jobs",
        type=int,
        default=None,
        metavar="N",
        help="training jobs that run at once (default: one per GPU, 1 without a GPU)",
    )
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where jobs run: local (worker processes on this machine, the default) or ray (Ray "
        "tasks on the cluster at --ray-address; needs the digits-core[ray] extra and the jobs "
        "folder at the same path on every node)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="HOST:PORT",
        help="the Ray cluster for --executor ray (default: $DIGITS_RAY_ADDRESS)",
    )
    parser.add_argument(
        "--max-upload-mb", type=float, default=64, metavar="MB", help="largest accepted upload (default: 64 MB)"
    )
    parser.add_argument(
        "--keep-results",
        type=int,
        default=50,
        metavar="N",
        help="stored inference results each model keeps; storing one more deletes the oldest "
        "(default: 50; 0 keeps all)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        metavar="N",
        help=f"requests answered at once (default: {DEFAULT_THREADS}); more wait their turn, "
        "requests still being sent take no thread",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"open connections at once (default: {DEFAULT_MAX_CONNECTIONS}); more wait until one closes",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help=f"close a connection that sent nothing for this long, a half-sent request included "
        f"(default: {DEFAULT_IDLE_TIMEOUT:g})",
    )
    parser.add_argument(
        "--secure-cookies",
        action="store_true",
        help="mark the login cookies Secure (sent over HTTPS only): for a server reached through an "
        "HTTPS proxy; automatic for requests that came over HTTPS",
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a reverse proxy (address or network, repeatable) whose X-Forwarded-For and "
        "X-Forwarded-Proto headers are believed: login throttling then counts the client it names, "
        "and X-Forwarded-Proto: https marks cookies Secure. Without it these headers are ignored",
    )
    parser.add_argument(
        "--default-view",
        action="append",
        default=[],
        metavar="TASK=VIEW",
        help="the view preselected for TASK's results (repeatable), e.g. classification=saliency; every "
        "view stays available. Default: $DIGITS_DEFAULT_VIEWS, then the user's settings file, then the "
        "bundled view (docs/web-ui.md, Default views)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="Flask's development server with its debugger instead of the production server "
        "(never on a shared network)",
    )
    parser.set_defaults(handler=run)


def _data_roots(values: list[str]) -> list[str]:
    """The ``--data-root`` folders; each must be an existing folder."""
    for value in values:
        if not os.path.isdir(os.path.expanduser(value)):
            raise ConfigurationError(f"--data-root {value} is not an existing folder.")
    return values


def _outbound_settings(args: argparse.Namespace) -> None:
    """Pass ``--allow-url``, ``--dicomweb-server`` and ``--default-view`` to this process and its workers
    (environment)."""
    from ..outbound import ALLOW_ENV

    for value in args.dicomweb_server:
        name, sep, url = value.partition("=")
        if not sep or not name.strip() or not url.strip().startswith(("http://", "https://")):
            raise ConfigurationError(
                f"--dicomweb-server {value}: write NAME=URL, e.g. pacs=https://pacs.example/dicom-web"
            )
    if args.default_view:
        from ..inference.view_choice import (  # only with the flag: it may load the plugins
            DEFAULT_VIEWS_ENV,
            default_view_for,
            parse_default_views,
        )

        chosen = parse_default_views(",".join(args.default_view), "--default-view")
        os.environ[DEFAULT_VIEWS_ENV] = ",".join(f"{task}={view}" for task, view in chosen.items())
        for task in chosen:
            default_view_for(task)  # an unknown view fails now, named with its flag, not at the first result
    if args.allow_url:
        os.environ[ALLOW_ENV] = "\n".join(p.strip() for p in args.allow_url if p.strip())
    if args.dicomweb_server:
        os.environ["DIGITS_DICOMWEB_SERVERS"] = "\n".join(v.strip() for v in args.dicomweb_server)


def _has_accounts(jobs_dir: str | os.PathLike | None) -> bool:
    """True when the jobs folder has user accounts (``digits users add``): every request then signs in."""
    from ..accounts import AccountStore
    from ..config import resolve_jobs_dir

    root = resolve_jobs_dir(jobs_dir)
    return AccountStore(root).enabled() or (root / "oidc.json").exists()


def run(args: argparse.Namespace) -> int:
    """Build the app and serve it until interrupted."""
    from ..web import create_app
    from ..web.request_guard import allowed_hosts

    token = args.auth_token or os.environ.get("DIGITS_AUTH_TOKEN") or None
    if args.host not in LOCAL_HOSTS and not token and not _has_accounts(args.jobs_dir):
        if not args.insecure_no_auth:
            raise ConfigurationError(
                f"--host {args.host} makes the server reachable from other machines, and it runs code (custom "
                "networks): give --auth-token TOKEN (or $DIGITS_AUTH_TOKEN), or --insecure-no-auth if this "
                "network is yours alone."
            )
        print(
            f"warning: serving on {args.host} without authentication (--insecure-no-auth): anyone who can reach "
            "this port can create jobs and run code (custom networks).",
            file=sys.stderr,
        )
    if not args.session_idle_minutes > 0:
        raise ConfigurationError("--session-idle-minutes must be a positive number of minutes.")
    if args.keep_results < 0:
        raise ConfigurationError(
            f"--keep-results {args.keep_results}: give a number of results to keep, or 0 to keep them all."
        )
    if args.port <= 0 or args.port > 65535:
        raise ConfigurationError(f"--port {args.port} is not a valid port number.")
    for flag, value in (("--threads", args.threads), ("--max-connections", args.max_connections)):
        if value < 1:
            raise ConfigurationError(f"{flag} {value}: give a positive number.")
    if not args.idle_timeout > 0:
        raise ConfigurationError(f"--idle-timeout {args.idle_timeout}: give a positive number of seconds.")
    _outbound_settings(args)
    scheduler = None
    if args.executor != "local":
        from ..config import resolve_jobs_dir
        from ..executors import make_scheduler

        scheduler = make_scheduler(
            args.executor,
            resolve_jobs_dir(args.jobs_dir),
            ray_address=args.ray_address,
            max_dataset_jobs=args.max_dataset_jobs,
            max_training_jobs=args.max_training_jobs,
        )
    app = create_app(
        args.jobs_dir,
        auth_token=token,
        max_dataset_jobs=args.max_dataset_jobs,
        scheduler=scheduler,
        start_scheduler=False,  # once the port is ours: a taken port fails before any job is touched
        max_training_jobs=args.max_training_jobs,
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024),
        allowed_hosts=allowed_hosts(args.host, args.allowed_host),
        data_roots=_data_roots(args.data_root),
        session_idle_minutes=args.session_idle_minutes,
        keep_results=args.keep_results,
        secure_cookies=args.secure_cookies,
        trusted_proxies=args.trusted_proxy,
    )
    scheduler = app.extensions["digits"]["scheduler"]
    server = None if args.debug else production_server(app, args)
    scheduler.start()
    url_host = "localhost" if args.host in ("127.0.0.1", "0.0.0.0", "::") else args.host
    print(
        f"DIGITS is serving {app.extensions['digits']['jobs_dir']} at http://{url_host}:{args.port}/ (Ctrl-C to stop)",
        flush=True,
    )
    print(f"  data roots: {', '.join(app.config['DIGITS_DATA_ROOTS'])}", flush=True)
    # SIGTERM/SIGHUP stop the server like Ctrl-C (see digits_core.cli.main): one-off workers (an export) and
    # running jobs are stopped, the jobs marked Aborted, the inference worker is closed.
    try:
        if server is None:
            app.run(host=args.host, port=args.port, debug=True, use_reloader=False, threaded=True)
        else:
            server.run()  # returns once the stop signal's KeyboardInterrupt reached its loop
    except KeyboardInterrupt:
        pass
    finally:
        from ..web.worker_calls import stop_workers  # a front door beside this one: loaded with the app, not the CLI

        stop_workers()  # an export (or other one-off worker) the stop caught mid-way: it cleans up and exits
        scheduler.shutdown(abort_running=True)
        app.extensions["digits"]["inference_worker"].close()
        if server is not None:
            server.close()
    return 0


def production_server(app: Flask, args: argparse.Namespace) -> BaseWSGIServer | MultiSocketServer:
    """A waitress server for ``app``, bound to ``--host``/``--port`` (not yet serving).

    Requests are read by one event loop, so a slow or half-sent request
    holds a connection (at most ``--max-connections``, closed after
    ``--idle-timeout`` seconds of silence) but no thread; complete requests
    are answered by ``--threads`` threads. Bodies beyond the upload limit
    are refused before they are buffered.

    Raises:
        ConfigurationError: The address cannot be bound (port taken, no such address).
    """
    from waitress import create_server

    _room_for_connections(args.max_connections)
    try:
        return create_server(
            app,
            host=args.host,
            port=args.port,
            threads=args.threads,
            connection_limit=args.max_connections,
            channel_timeout=args.idle_timeout,
            cleanup_interval=max(1.0, min(30.0, args.idle_timeout / 2)),
            max_request_body_size=app.config["MAX_CONTENT_LENGTH"] + 1024 * 1024,
            asyncore_use_poll=True,  # select() stops at file descriptor 1024
            ident="DIGITS",
            clear_untrusted_proxy_headers=False,  # the app decides whom to believe (--trusted-proxy)
        )
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot listen on {args.host} port {args.port}: {exc.strerror or exc}. Choose another --port "
            "(or stop the program using it)."
        ) from exc


def _room_for_connections(connections: int) -> None:
    """Raise this process's open-file limit so ``connections`` sockets fit beside the files it uses."""
    try:
        import resource
    except ImportError:  # Windows: no such limit to raise
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + 512
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            logger.warning("could not raise the open-file limit to %d; --max-connections may not be reached", target)
