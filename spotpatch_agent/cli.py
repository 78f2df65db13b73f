"""Entry points: ``spotpatch-agent serve | run | apply | revert | demo | eval | doctor | checks suggest | audit |
schema`` (docs/design.md §1, §3).

``serve`` speaks the protocol on stdin/stdout; fd 1 is reserved for frames before anything else runs, so
a stray ``print``, a C-level write or a child process can only reach stderr. ``run`` drives one job from
the terminal and saves its diff for review; ``apply`` / ``revert`` write exactly that reviewed diff, or undo it
(review_cli.py); ``demo`` runs a real job on the bundled demo app (offline with a scripted provider);
``demo --serve`` serves that app with ``vite dev``, the plugin and the page overlay until Ctrl-C.
``eval`` measures a model on a fixed task suite through the real engine (spotpatch_agent/eval, docs/eval.md).
``checks suggest`` prints a proposed checks config (never runs or writes anything). What ``run``, ``demo``
and ``checks suggest`` print passes through :func:`~spotpatch_agent.terminal.inert` (control characters shown).
``audit`` lists or shows the persisted audit ledgers (spotpatch_agent/audit/show.py).
``schema`` prints the protocol's JSON Schema (``--markdown``: the method reference of docs/protocol.md;
``--config``: the JSON Schema of ``spotpatch.config.json``). ``doctor`` checks the set-up (git, the engine,
the project's health, the config, each provider's key variable and reachability) and prints a checklist.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from spotpatch_agent import __version__
from spotpatch_agent.exit_codes import EXIT_OK, EXIT_USAGE


def setup_logging() -> None:
    from spotpatch_agent.policy.redact import RedactingFilter, redact_env_keys

    redact_env_keys()
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter())
    handler.setFormatter(logging.Formatter("[spotpatch] %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    level = os.environ.get("SPOTPATCH_LOG", "INFO").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        root.setLevel(logging.INFO)
        logging.getLogger("spotpatch").warning("SPOTPATCH_LOG must be DEBUG, INFO, WARNING or ERROR; using INFO")
    else:
        root.setLevel(level)
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="spotpatch-agent",
        description="SpotPatch engine: turn per-element instructions into one reviewable, revertable diff.",
    )
    parser.add_argument("--version", action="version", version=f"spotpatch-agent {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_cmd = sub.add_parser("serve", help="speak the JSON-RPC protocol on stdin/stdout")
    serve_cmd.add_argument("--max-frame-bytes", type=_frame_bytes, default=None, metavar="N",
                           help="largest JSON-RPC frame body accepted, in bytes (default 8 MiB); a larger frame is "
                                "answered with -32600 and skipped without being buffered")
    run = sub.add_parser("run", help="run one annotation job on a git project from the terminal")
    run.add_argument("--project", required=True, type=Path, help="the project's git top-level directory")
    run.add_argument("--target", action="append", default=[], metavar="FILE:LINE[:COL]",
                     help="a target's source location (repeat; pairs with --instruction in order)")
    run.add_argument("--instruction", action="append", default=[], metavar="TEXT",
                     help="what to change at the matching --target")
    run.add_argument("--config", type=Path, help="trusted config (default: <project>/spotpatch.config.json)")
    run.add_argument("--model", help="model profile id (default: the first configured)")
    run.add_argument("--apply", action="store_true",
                     help="refused: a fresh run is never applied unreviewed; run without it, review the diff, then "
                          "`spotpatch-agent apply JOB_ID`")
    run.add_argument("--suggest", action="store_true",
                     help="when the job fails because the model cannot call tools and the config turns the "
                          "suggestion lane on, print a read-only draft suggestion (it changes nothing)")
    run.add_argument("--include-local-changes", action="store_true",
                     help="start the job from your staged, unstaged and untracked changes (the consent the page "
                          "asks for; without it a working tree with local changes runs no job)")
    run.add_argument("--json", action="store_true",
                     help="print one JSON object for scripts on stdout (progress goes to stderr); see "
                          "docs/configuration.md, The CLI")
    for name, what in (("apply", "apply exactly the diff `run` saved for review (never a new model run)"),
                       ("revert", "restore byte for byte what `apply` (or the page's Apply) wrote")):
        one = sub.add_parser(name, help=what)
        one.add_argument("job_id", metavar="JOB_ID", help="the job id `run` printed")
        one.add_argument("--project", type=Path, default=Path("."), help="the project's git top level (default: .)")
        if name == "apply":
            one.add_argument("--sha256", metavar="HEX", help="the diff's SHA-256 `run` printed: any other is refused")
        one.add_argument("--json", action="store_true", help="print one JSON object for scripts on stdout")
    demo = sub.add_parser("demo", help="run a real job on the bundled demo Vite app (offline without OPENAI_API_KEY)")
    demo.add_argument("--keep", action="store_true", help="keep the temporary demo project")
    demo.add_argument("--api", choices=("chat", "responses"), default="chat",
                      help="the provider API: OpenAI-compatible Chat Completions (default) or Responses")
    demo.add_argument("--edit-format", choices=("replace", "anchors"), default=None,
                      help="with a model: the model profile's editFormat (default: the profile's own default; "
                           "docs/local-models.md)")
    demo.add_argument("--serve", action="store_true",
                      help="instead, serve the demo app with `vite dev`, the plugin and the page overlay until Ctrl-C "
                           "(needs Node ≥ 20 and this repository's node-shim/)")
    demo.add_argument("--port", type=_port, default=5173,
                      help="with --serve: the dev server's port on 127.0.0.1 (default 5173, the next free one "
                           "if taken; 0: any free port)")
    from spotpatch_agent.eval.cli import add_eval_parser

    add_eval_parser(sub)
    doctor = sub.add_parser("doctor", help="check the set-up (git, the engine, the project's health, the config, "
                                           "each provider's key variable and reachability) and print the fixes")
    doctor.add_argument("--project", type=Path, default=Path("."), help="the project's git top level (default: .)")
    doctor.add_argument("--config", type=Path, help="trusted config (default: <project>/spotpatch.config.json)")
    doctor.add_argument("--no-probe", action="store_true", help="do not contact the providers (no probe)")
    doctor.add_argument("--probe-timeout", type=_seconds, default=None, metavar="SECONDS",
                        help="longest wait for one provider's probe (default 30)")
    doctor.add_argument("--json", action="store_true", help="print {ok, exitCode, items} as JSON instead")
    checks = sub.add_parser("checks", help="project checks: 'checks suggest' proposes a config to paste")
    checks_sub = checks.add_subparsers(dest="checks_command", required=True)
    suggest = checks_sub.add_parser("suggest", help="print a proposed {\"checks\": [...]} from package.json scripts "
                                                    "and tsconfig.json (runs nothing, writes nothing)")
    suggest.add_argument("--root", type=Path, default=Path("."), help="the project directory (default: .)")
    audit = sub.add_parser("audit", help="list the persisted audit ledgers of a project, or show one "
                                         "(trusted config audit.persist)")
    audit.add_argument("job_id", nargs="?", metavar="JOB_ID", help="the job whose ledger to show (default: list them)")
    audit.add_argument("--project", type=Path, default=Path("."), help="a directory of the git project (default: .)")
    audit.add_argument("--json", action="store_true", help="print JSON instead of a table")
    init = sub.add_parser("init", help="set SpotPatch up in your Vite app: the plugin, vite.config, "
                                       "spotpatch.config.json, .gitignore (docs/adopt.md)")
    init.add_argument("--project", type=Path, default=None,
                      help="the Vite app's folder (default: the current folder, or the one app below it)")
    init.add_argument("--yes", action="store_true", help="do not ask: go ahead (and create a git repository if none)")
    init_mode = init.add_mutually_exclusive_group()
    init_mode.add_argument("--dry-run", action="store_true",
                           help="print the diff of every file init would change, and change nothing")
    init_mode.add_argument("--undo", action="store_true", help="remove exactly what init added to this app")
    mcp = sub.add_parser("mcp", help="serve MCP on stdin/stdout for your coding agent (Claude Code, Codex, VS Code, "
                                     "Cursor): it does the jobs you send from the page (docs/mcp.md)")
    mcp.add_argument("--project", type=Path, default=Path("."),
                     help="a directory of the project whose dev server runs SpotPatch (default: .)")
    mcp.add_argument("--print-config", choices=("claude-code", "codex", "vscode", "cursor"), metavar="CLIENT",
                     help="print how to add this server to CLIENT (claude-code, codex, vscode, cursor) and exit")
    schema = sub.add_parser("schema", help="print the protocol's JSON Schema (protocol/spotpatch.schema.json)")
    schema_kind = schema.add_mutually_exclusive_group()
    schema_kind.add_argument("--markdown", action="store_true",
                             help="print the generated method reference of docs/protocol.md instead")
    schema_kind.add_argument("--config", action="store_true",
                             help="print the JSON Schema of spotpatch.config.json instead "
                                  "(protocol/spotpatch.config.schema.json)")
    args = parser.parse_args(argv)

    if args.command == "schema":
        return print_schema(markdown=args.markdown, config=args.config)
    if args.command == "serve":
        return serve(max_frame_bytes=args.max_frame_bytes)
    if args.command == "mcp":
        if args.print_config:
            from spotpatch_agent.handoff.setup import print_config

            return print_config(args.print_config, args.project)
        from spotpatch_agent.handoff.mcp_server import mcp_command

        return mcp_command(args.project)  # stdout carries MCP frames only
    from spotpatch_agent.terminal import inert_terminal

    # What these commands print comes from the model, files, diffs and checks: show control characters,
    # never let the terminal obey them (issue 12).
    with inert_terminal():
        if args.command == "checks":
            return suggest_checks_command(args.root)
        if args.command == "init":
            from spotpatch_agent.init.command import init_command

            return init_command(args.project, yes=args.yes, dry_run=args.dry_run, undo=args.undo)
        if args.command == "audit":
            from spotpatch_agent.audit.show import audit_command

            return audit_command(args.project, args.job_id, as_json=args.json)
        setup_logging()
        if args.command in ("apply", "revert"):
            from spotpatch_agent.review_cli import review_command

            return review_command(args.command, args.project, args.job_id, sha256=getattr(args, "sha256", None),
                                  as_json=args.json)
        if args.command == "run":
            from spotpatch_agent.run_cli import run_command

            return run_command(args)
        if args.command == "eval":
            from spotpatch_agent.eval.cli import eval_command

            return eval_command(args)
        if args.command == "doctor":
            from spotpatch_agent.doctor import DEFAULT_PROBE_TIMEOUT, doctor_command

            return doctor_command(args.project, args.config, probe=not args.no_probe, as_json=args.json,
                                  timeout=args.probe_timeout or DEFAULT_PROBE_TIMEOUT)
        if args.serve:
            if args.edit_format is not None:
                parser.error("--edit-format does not apply to demo --serve (set editFormat in spotpatch.config.json)")
            if args.keep:
                parser.error("--keep does not apply to demo --serve (its temp project is removed on exit)")
            from spotpatch_agent.demo.serve import serve_demo

            return serve_demo(port=args.port)
        from spotpatch_agent.demo.runner import run_demo

        return run_demo(keep=args.keep, api=args.api, edit_format=args.edit_format)


def suggest_checks_command(root: Path) -> int:
    """``checks suggest``: the proposed ``{"checks": [...]}`` on stdout, the reasoning on stderr (issue 8).
    Reads ``package.json`` and ``tsconfig.json`` only; exit 2 when ``root`` is not a directory."""
    from spotpatch_agent.checks.suggest import suggest_checks

    if not root.is_dir():
        print(f"spotpatch-agent checks suggest: {root} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    suggestion = suggest_checks(root)
    for note in suggestion.notes:
        print(note, file=sys.stderr)
    print("Paste the checks below into spotpatch.config.json (or the Vite plugin's `checks` option); review each "
          "command first. Nothing was run or written.", file=sys.stderr)
    sys.stdout.write(suggestion.config_json())
    sys.stdout.flush()
    return EXIT_OK


def _port(text: str) -> int:
    """``--port``: 0 (any free port) or 1..65535."""
    if not text.isascii() or not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError("must be a port number, 0..65535")
    return int(text)


def _seconds(text: str) -> float:
    """``--probe-timeout``: a number of seconds, 1 to 600."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds") from None
    if not 1 <= value <= 600:
        raise argparse.ArgumentTypeError("must be between 1 and 600 seconds")
    return value


def _frame_bytes(text: str) -> int:
    """``--max-frame-bytes``: a positive decimal integer of bytes."""
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("must be a positive integer number of bytes")
    return int(text)


def serve(max_frame_bytes: int | None = None) -> int:
    """Serve the protocol until ``exit``, stdin EOF or the parent's death; returns the exit code.

    ``max_frame_bytes`` bounds a frame body (default ``protocol/limits.py`` ``MAX_FRAME_BYTES``).

    Cold start (issue 17): only what answering ``initialize`` needs is imported before its reply (the job
    runner, the providers, the tools, checks, audit and suggestion code load on first use or after the reply),
    and pydantic's plugin discovery is off unless ``PYDANTIC_DISABLE_PLUGINS`` says otherwise: it scans the
    metadata of every installed distribution when the first model is built, and a plugin would see every
    message the engine validates. Child processes never see the variable (git and checks get allowlisted
    environments)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # fd 1 now points at stderr: nothing but frames can reach the protocol stream
    sys.stdout = sys.stderr
    setup_logging()

    import anyio

    from spotpatch_agent.engine.service import EngineService
    from spotpatch_agent.handoff.hub import AgentHub
    from spotpatch_agent.protocol.catalog import bind_handlers
    from spotpatch_agent.protocol.jobs import JobCreateParams
    from spotpatch_agent.protocol.limits import MAX_FRAME_BYTES
    from spotpatch_agent.protocol.session import AgentChannelInfo, InitializeParams
    from spotpatch_agent.rpc.server import REQUEST_ID, RpcServer

    server: RpcServer
    service = EngineService(send_event=lambda event: server.notify("job/event", event))
    agents = AgentHub(service)  # jobs sent "to my agent" are served to MCP clients (docs/mcp.md)

    async def initialize(params: InitializeParams) -> Any:
        result = await service.initialize(params)
        agents.configure(Path(params.project_root))  # agents may now attach (handoff/channel.py)
        _watch_parent(params.process_id, server)
        return result

    async def session_get(params: Any) -> Any:
        result = await service.session_get(params)
        result.agents = AgentChannelInfo.model_validate(agents.info())  # assigned: dumped as a set field
        return result

    created_by: dict[Any, str] = {}  # job/create request id → job id, for a late $/cancelRequest

    async def job_create(params: JobCreateParams) -> Any:
        snapshot = await service.job_create(params)
        created_by[REQUEST_ID.get()] = snapshot.job_id
        while len(created_by) > 1024:
            created_by.pop(next(iter(created_by)))
        return snapshot

    async def late_cancel(request_id: Any, method: str) -> None:
        job_id = created_by.get(request_id) if method == "job/create" else None
        if job_id is not None:
            await service.cancel_running(job_id)

    async def main_task() -> None:
        async with service.running(), anyio.create_task_group() as tg:
            tg.start_soon(agents.serve)
            await anyio.sleep_forever()

    # Params models come from the method catalog; bind_handlers raises unless these are exactly its requests.
    handlers: dict[str, Any] = bind_handlers({
        "initialize": initialize,
        "health/get": service.health,
        "session/get": session_get,
        "prompt/render": service.prompt_render,
        "job/create": job_create,
        "job/get": service.job_get,
        "job/diff": service.job_diff,
        "job/cancel": service.job_cancel,
        "job/apply": service.job_apply,
        "job/revert": service.job_revert,
        "job/close": service.job_close,
        "job/list": service.job_list,
        "job/events": service.job_events,
        "job/audit": service.job_audit,
        "job/suggest": service.job_suggest,
        "provider/list": service.provider_list,
        "provider/probe": service.provider_probe,
    })
    if os.environ.get("SPOTPATCH_BENCH") == "1":  # bench-only methods (tests/bench/README.md); absent otherwise
        from spotpatch_agent.rpc.bench import bench_handlers

        handlers.update(bench_handlers(lambda event: server.notify("job/event", event)))
    server = RpcServer(in_fd=0, out_fd=protocol_fd, handlers=handlers, on_stop=service.stop_all,
                       max_body_bytes=MAX_FRAME_BYTES if max_frame_bytes is None else max_frame_bytes,
                       main=main_task, late_cancel=late_cancel,
                       finish_on_stop=frozenset({"job/apply", "job/revert"}))  # never "Request cancelled" on EOF
    _watch_parent(None, server)
    return server.serve()


def print_schema(*, markdown: bool = False, config: bool = False) -> int:
    """``schema``: print the protocol JSON Schema, or with ``markdown`` the generated method reference of
    docs/protocol.md (docs/design.md §3), or with ``config`` the JSON Schema of ``spotpatch.config.json``.
    Imports the protocol package only (pydantic), never the engine."""
    if config:
        from spotpatch_agent.protocol.config_schema import render_config_schema

        text = render_config_schema()
    elif markdown:
        from spotpatch_agent.protocol.docgen import render_method_reference

        text = render_method_reference()
    else:
        from spotpatch_agent.protocol.schema import render_schema

        text = render_schema()
    sys.stdout.write(text)
    sys.stdout.flush()
    return EXIT_OK


def _watch_parent(process_id: int | None, server: Any) -> None:
    """Stop the server when ``process_id`` (or, with None, our original parent) dies (docs/design.md §3)."""
    original_ppid = os.getppid()

    def alive() -> bool:
        if process_id is None:
            return os.getppid() == original_ppid
        try:
            os.kill(process_id, 0)  # Windows: os.kill with signal 0 is not a probe; use psutil there (TODO)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def watch() -> None:
        while alive():
            threading.Event().wait(0.25)
        logging.getLogger("spotpatch.rpc").warning("parent process is gone: stopping")
        server.stop()

    threading.Thread(target=watch, name="spotpatch-parent-watch", daemon=True).start()
