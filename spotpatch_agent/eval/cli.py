"""``spotpatch-agent eval``: the model eval's flags and its command (docs/eval.md).

Exit codes: 0 every task run passed, 1 the suite ran and some run failed (the table says why), 2 usage
(a flag, an unknown task pattern, the key variable not set, an edit format this version cannot pass).
The key is read from the environment by the engine's adapter only (``--api-key-env``, default
``OPENAI_API_KEY``); it is never printed, nor written to the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from spotpatch_agent.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

#: Edit formats the flag offers; which of them a model profile accepts is the config model's business.
EDIT_FORMATS = ("replace", "anchors")


def add_eval_parser(sub: Any) -> None:
    """Register ``eval`` on the ``spotpatch-agent`` subparsers."""
    p = sub.add_parser("eval", help="measure a model: run the fixed task suite through the real engine and judge "
                                    "each result (docs/eval.md)")
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"),
                   help="the OpenAI-compatible server (default: $OPENAI_BASE_URL), e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--model", default=os.environ.get("SPOTPATCH_MODEL"),
                   help="the model name the server expects (default: $SPOTPATCH_MODEL)")
    p.add_argument("--api", choices=("chat", "responses"), default="chat",
                   help="Chat Completions (default) or Responses")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                   help="the environment variable holding the key (default OPENAI_API_KEY; any value for a local "
                        "server that takes none)")
    p.add_argument("--runs", type=_positive, default=1, metavar="N", help="run every task N times (default 1)")
    p.add_argument("--tasks", metavar="PATTERN",
                   help="only the tasks whose id matches this glob (e.g. 'vue/*', '*/prop-chain'; commas: any of)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON (docs/eval.md)")
    p.add_argument("--edit-format", choices=EDIT_FORMATS, default="replace",
                   help="the model profile's edit format: replace (replace_text + apply_patch, today's tools) or "
                        "anchors (line anchors; only where the config model has editFormat)")
    p.add_argument("--timeout", type=_positive_float, default=300.0, metavar="SECONDS",
                   help="longest a task's job may run before the eval cancels it (default 300)")
    p.add_argument("--max-output-tokens", type=int, default=None, metavar="N",
                   help="the model profile's maxOutputTokens (default: the engine's)")
    p.add_argument("--keep", action="store_true", help="keep each task's temp project (paths in the JSON)")
    p.add_argument("--no-typecheck", action="store_true", help="skip the apps' typecheck (the column says off)")
    p.add_argument("--list", action="store_true", help="list the tasks (id, kind, targets) and exit")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("a whole number ≥ 1")
    return int(text)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("a number of seconds") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError("between 0 and 86400 seconds")
    return value


def _usage(message: str) -> int:
    print(f"spotpatch-agent eval: {message}", file=sys.stderr)
    return EXIT_USAGE


def edit_format_supported(edit_format: str) -> str | None:
    """None when ``edit_format`` can be passed to a model profile, else why not. ``replace`` (today's tools)
    always can; another value only when the config model has ``editFormat`` (issue 27 part 2)."""
    from spotpatch_agent.protocol.config import ModelProfile

    if edit_format == "replace" or "edit_format" in ModelProfile.model_fields:
        return None
    return (f"--edit-format {edit_format} needs the model profile key editFormat, which this version does not "
            "have yet; only --edit-format replace runs here")


def eval_command(args: argparse.Namespace) -> int:
    from spotpatch_agent.eval.report import eval_document, format_table
    from spotpatch_agent.eval.runner import EvalSettings, key_is_set, run_suite
    from spotpatch_agent.eval.tasks import select_tasks

    tasks = select_tasks(args.tasks)
    if not tasks:
        return _usage(f"no task id matches {args.tasks!r} (see --list)")
    if args.list:
        for t in tasks:
            print(f"{t.id:<28} {t.kind:<18} {len(t.targets)} target(s): "
                  + " | ".join(x.instruction for x in t.targets))
        return EXIT_OK
    if not args.base_url or not args.model:
        return _usage("give --base-url and --model (or set OPENAI_BASE_URL and SPOTPATCH_MODEL)")
    if args.json is not None and not args.json.resolve().parent.is_dir():
        return _usage(f"--json {args.json.name}: its folder does not exist")
    why = edit_format_supported(args.edit_format)
    if why is not None:
        return _usage(why)
    settings = EvalSettings(base_url=args.base_url, model=args.model, api=args.api, key_env=args.api_key_env,
                            runs=args.runs, timeout=args.timeout, keep=args.keep, edit_format=args.edit_format,
                            typecheck=not args.no_typecheck, max_output_tokens=args.max_output_tokens)
    from pydantic import ValidationError

    from spotpatch_agent.eval.runner import build_config

    try:
        build_config(settings, settings.base_url, None)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        return _usage("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)[:600])
    if not key_is_set(settings):
        return _usage(f"the key variable {settings.key_env} is not set (for a local server that needs no key, "
                      f"set it to any value)")
    rows: list[dict[str, Any]] = []
    complete = True
    try:
        run_suite(tasks, settings, lambda _task, _run: nullcontext(settings.base_url), out=sys.stderr, rows=rows)
    except KeyboardInterrupt:  # Ctrl-C: the running job was cancelled and its temp copy removed; keep the rest
        complete = False
        print("\nspotpatch-agent eval: interrupted; the table holds the runs that finished.", file=sys.stderr)
    document = eval_document(settings, [t.id for t in tasks], rows, complete=complete)
    sys.stdout.write(format_table(document))
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
        except OSError as exc:
            print(f"spotpatch-agent eval: the JSON could not be written ({exc.strerror}); the table above holds "
                  "the results", file=sys.stderr)
            return EXIT_FAILED
        print(f"JSON written to {args.json}", file=sys.stderr)
    return EXIT_OK if complete and all(r["passed"] for r in rows) else EXIT_FAILED
