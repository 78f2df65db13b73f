"""Fixtures of the protocol robustness tests: the e2e ``project`` (a git copy of the demo app) and ``canary``."""

from tests.e2e.conftest import canary, project  # noqa: F401 - re-exported fixtures
