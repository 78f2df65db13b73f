"""Helpers shared by the tests; never tests themselves.

Where a test helper lives (tests/architecture/test_test_layout.py enforces the first rule):

- A test module (``test_*.py``) never imports another test module: editing one test file must not break
  another. A helper, constant or fixture that more than one test module uses moves out of the test module.
- Used by test modules of one folder: an underscore module in that folder, ``tests/<folder>/_support.py``
  or ``tests/<folder>/_<topic>.py`` for a topic of its own (``tests/worktree/_journal.py``).
- Used by more than one folder: ``tests/support/<topic>.py`` (``serve.py``: a ``serve`` subprocess on the demo
  project; ``cli.py``: the command line; ``annotations.py``: the one annotation and target builder).
- Shared pytest fixtures that need no import live in a ``conftest.py``; ``tests/conftest.py`` also keeps the
  git helpers (``git``, ``make_repo``) and ``tests/engine_client.py`` the engine client, as before.
- Test files and test functions are named after what they check, never after the issue or the review that
  found the bug (no ``breaker``, ``issue`` or ``break_<N>`` in a test file's name).
"""
