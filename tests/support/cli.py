"""The ``spotpatch-agent`` command line run as a subprocess."""

from __future__ import annotations

import os
import subprocess

from tests.engine_client import engine_command


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = engine_command()[:-1] + list(args)
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    return subprocess.run(command, capture_output=True, text=True, env={**base, **(env or {})},
                          stdin=subprocess.DEVNULL, timeout=timeout)
