"""`rewardlab serve`: any reward behind HTTP with cross-request dynamic batching (one process, or Ray replicas)."""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any

from rewardlab.cli.terminal import CLIError, console
from rewardlab.registry import SpecError, load


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `serve`."""
    serve = subparsers.add_parser(
        "serve", parents=[parent], help="serve a reward over HTTP (batched across requests)",
        description="Serve a reward: POST /v1/score, POST /get_reward (OpenRLHF), GET /health, /metrics, /v1/info; "
                    "or an environment over one protocol per port (--env SPEC --protocol ors|openenv|nemo-gym).",
    )
    serve.add_argument("--reward", "-r", default=None, metavar="SPEC",
                       help="reward spec (name, family:ARG, JSON, YAML)")
    serve.add_argument("--env", default=None, metavar="SPEC",
                       help='environment spec, e.g. \'{"answer": {"tasks": "tasks.jsonl", "reward": "exact_match"}}\' '
                            "(with --protocol; the 'protocols' extra)")
    serve.add_argument("--protocol", default=None, choices=("ors", "openenv", "nemo-gym"),
                       help="the environment protocol served on this port (with --env)")
    serve.add_argument("--max-sessions", type=int, default=4096, metavar="N",
                       help="open environment sessions at most; the oldest is dropped beyond it (4096)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port (8000)")
    serve.add_argument("--max-batch-tokens", type=int, default=16384, metavar="N",
                       help="padded-token budget of one batch, tokens estimated as characters/4 (16384)")
    serve.add_argument("--max-batch-size", type=int, default=256, metavar="N", help="samples per batch at most (256)")
    serve.add_argument("--max-wait-ms", type=float, default=5.0, metavar="MS",
                       help="longest a sample waits for its batch to fill (5 ms)")
    serve.add_argument("--max-queue", type=int, default=4096, metavar="N",
                       help="samples waiting at most; beyond it requests get 503 + Retry-After (4096)")
    serve.add_argument("--max-body-mb", type=float, default=32.0, metavar="MB", help="request body limit (32 MB)")
    serve.add_argument("--api-key", default=None, metavar="KEY",
                       help="require 'Authorization: Bearer KEY' on every route but /health (or set "
                            "REWARDLAB_API_KEY)")
    serve.add_argument("--files-root", default=None, metavar="DIR",
                       help="folder that file-path references in samples (an SQLite db, a schema) must stay inside; "
                            "unset: every file-path reference is refused")
    serve.add_argument("--request-timeout", type=float, default=15.0, metavar="S",
                       help="a request (headers and body) must arrive within S seconds, else 408 and close (15)")
    serve.add_argument("--max-connections", type=int, default=512, metavar="N",
                       help="open connections at most; beyond it requests get 503 at once (512)")
    serve.add_argument("--no-docs", action="store_true", help="turn off /docs, /redoc and /openapi.json")
    serve.add_argument("--workers", type=int, default=None, metavar="N", help="concurrent workers inside the reward")
    serve.add_argument("--timeout", type=float, default=None, metavar="S", help="per-sample time limit of the reward")
    serve.add_argument("--ray", action="store_true", help="serve on Ray Serve replicas (the 'distributed' extra)")
    serve.add_argument("--replicas", type=int, default=1, metavar="N", help="Ray Serve replicas (with --ray)")
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    """Load the reward, build the app, run uvicorn (or Ray Serve) until interrupted; in-flight requests drain."""
    if (args.env is None) == (args.reward is None):
        raise CLIError("give exactly one of --reward SPEC (a reward server) and --env SPEC (an environment)")
    if (args.env is None) != (args.protocol is None):
        raise CLIError("--env and --protocol go together: an environment is served over one protocol per port")
    api_key = args.api_key or os.environ.get("REWARDLAB_API_KEY") or None
    options: dict[str, Any] = {
        "max_batch_tokens": args.max_batch_tokens, "max_batch_size": args.max_batch_size,
        "max_wait_ms": args.max_wait_ms, "max_queue": args.max_queue,
        "max_body_bytes": int(args.max_body_mb * (1 << 20)), "api_key": api_key,
        "files_root": _files_root(args.files_root), "docs": not args.no_docs,
    }
    if args.env is not None:
        return _serve_env(args, options)
    if args.ray:
        from rewardlab.serve.ray_serve import serve_with_ray

        def ready(url: str) -> None:
            if not args.quiet:
                console.print(f"serving on {args.replicas} Ray Serve replica(s) at {url}", highlight=False)

        serve_with_ray(args.reward, replicas=args.replicas, host=args.host, port=args.port,
                       runtime={"workers": args.workers, "timeout": args.timeout}, quiet=args.quiet,
                       on_ready=ready, **options)
        return 0
    try:
        import uvicorn

        from rewardlab.serve.app import create_app
        from rewardlab.serve.guard import uvicorn_config
    except ImportError as error:
        raise CLIError(f"serving needs the 'serve' extra (pip install 'rewardlab[serve]'): {error}") from None
    try:
        reward = load(args.reward)
    except SpecError as error:
        raise CLIError(str(error)) from None
    if args.workers is not None or args.timeout is not None:
        try:
            reward.configure(workers=args.workers, timeout=args.timeout)
        except ValueError as error:
            raise CLIError(str(error)) from None
    try:
        config = uvicorn_config(create_app(reward, spec=args.reward, **options), host=args.host, port=args.port,
                                request_timeout=args.request_timeout, max_connections=args.max_connections,
                                log_level="warning" if args.quiet else "info")
    except ValueError as error:
        raise CLIError(str(error)) from None
    if not args.quiet:
        console.print(f"serving [bold]{reward.name}[/] on http://{args.host}:{args.port} "
                      f"(POST /v1/score, POST /get_reward, GET /health, /metrics, /v1/info)", highlight=False)
    # uvicorn drains in-flight requests on SIGTERM, then re-raises the signal with the handler it found: make
    # that one a no-op so a drained shutdown exits 0 (Ctrl-C twice still forces an exit).
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    uvicorn.Server(config).run()
    return 0


def _serve_env(args: argparse.Namespace, options: dict[str, Any]) -> int:
    """Serve `--env` over `--protocol` on its own port, with the reward server's limits and batching."""
    if args.ray:
        raise CLIError("--env is served in one process; --ray serves rewards only")
    if args.quiet:
        os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")  # the ORS SDK's server logs every request at INFO
    try:
        import uvicorn

        from rewardlab.envs import load_env
        from rewardlab.serve.guard import uvicorn_config
        from rewardlab.serve.protocols import ServeLimits, create_protocol_app
    except ImportError as error:
        raise CLIError(f"serving an environment needs the 'serve' extra: {error}") from None
    try:
        env = load_env(args.env)
        if args.workers is not None or args.timeout is not None:
            env.reward.configure(workers=args.workers, timeout=args.timeout)
        limits = ServeLimits(**{k: v for k, v in options.items() if k != "docs"}, max_sessions=args.max_sessions)
        app = create_protocol_app(env, args.protocol, limits)
        config = uvicorn_config(app, host=args.host, port=args.port, request_timeout=args.request_timeout,
                                max_connections=args.max_connections, log_level="warning" if args.quiet else "info")
    except (SpecError, ValueError, ImportError) as error:
        raise CLIError(str(error)) from None
    if not args.quiet:
        console.print(f"serving environment [bold]{env.name}[/] ({len(env.tasks())} tasks) over {args.protocol} on "
                      f"http://{args.host}:{args.port}", highlight=False)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    uvicorn.Server(config).run()
    return 0


def _files_root(root: str | None) -> str | None:
    """The operator's files root as an absolute folder (None stays None: file references refused)."""
    if root is None:
        return None
    path = os.path.realpath(os.path.expanduser(root))
    if not os.path.isdir(path):
        raise CLIError(f"--files-root {root!r} is not a folder")
    return path
