"""The exit codes of the ``spotpatch-agent`` commands (docs/configuration.md "The CLI"): imports nothing, so
``cli.py`` (cold start) and ``run_cli.py`` share them without importing each other."""

from __future__ import annotations

#: The command did what was asked (``run``: the job reached ``awaiting-review``, and was applied with ``--apply``).
EXIT_OK = 0
#: The command ran and failed: a job that did not reach review, a blocked repository, an engine error.
EXIT_FAILED = 1
#: Bad usage: arguments, the config file, not a git repository, no usable target.
EXIT_USAGE = 2
#: ``run`` without a usable provider: the copyable prompt was printed instead of running a job.
EXIT_PROMPT_ONLY = 3
