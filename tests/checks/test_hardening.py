"""The engine's /proc hardening before a check runs (``checks.runner.protect_engine_environ``): a
``prctl`` that fails is reported on stderr, redacted, never silently ignored (issue 21). Linux, like the
rest of the checks suite."""

from __future__ import annotations

import errno
import logging
import subprocess
import sys
import textwrap

import pytest

from spotpatch_agent.checks.runner import PR_GET_DUMPABLE, PR_SET_DUMPABLE, libc_prctl, set_non_dumpable
from spotpatch_agent.policy.redact import REDACTOR

CANARY = "sk-canary-prctl-5b1e0c9d7a"


def test_a_failing_prctl_is_logged_redacted_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    REDACTOR.add_secret(CANARY)
    calls: list[tuple[int, int]] = []

    def refusing_prctl(option: int, value: int) -> None:
        calls.append((option, value))
        raise OSError(errno.EPERM, f"refused for {CANARY} by /home/someone/.local/lib/libc.so.6")

    with caplog.at_level(logging.WARNING, logger="spotpatch.checks"):
        held = set_non_dumpable(refusing_prctl)

    assert held is False and calls == [(PR_SET_DUMPABLE, 0)]
    [record] = [r for r in caplog.records if r.name == "spotpatch.checks"]
    line = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "prctl(PR_SET_DUMPABLE, 0) did not take effect" in line and f"errno {errno.EPERM}" in line
    assert CANARY not in caplog.text and "/home/someone" not in caplog.text


def test_a_prctl_that_cannot_be_loaded_is_logged_too(caplog: pytest.LogCaptureFixture) -> None:
    def missing(option: int, value: int) -> None:
        raise AttributeError("/usr/lib/libc.so.6: undefined symbol: prctl")

    with caplog.at_level(logging.WARNING, logger="spotpatch.checks"):
        assert set_non_dumpable(missing) is False
    assert "check hardening failed" in caplog.text and "/usr/lib" not in caplog.text


def test_a_prctl_that_holds_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="spotpatch.checks"):
        assert set_non_dumpable(lambda option, value: None) is True
    assert caplog.records == []


def test_the_real_prctl_reports_a_non_zero_return_as_an_error() -> None:
    # The return code the old call ignored: PR_SET_DUMPABLE accepts only 0 and 1, so 2 fails with EINVAL.
    with pytest.raises(OSError) as caught:
        libc_prctl(PR_SET_DUMPABLE, 2)
    assert caught.value.errno == errno.EINVAL


def test_the_engine_process_is_non_dumpable_after_protection_and_says_nothing() -> None:
    # In a child interpreter: the flag is per process (this test process keeps its own).
    script = textwrap.dedent(f"""
        import ctypes, logging
        logging.basicConfig(level=logging.DEBUG)
        from spotpatch_agent.checks.runner import protect_engine_environ
        libc = ctypes.CDLL(None, use_errno=True)
        before = libc.prctl({PR_GET_DUMPABLE}, 0, 0, 0, 0)
        protect_engine_environ()
        print(before, libc.prctl({PR_GET_DUMPABLE}, 0, 0, 0, 0))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0"]
    assert "check hardening failed" not in done.stderr
