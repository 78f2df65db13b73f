"""What looks like a credential, by its name: the one rule (docs/security.md §1, issue 30).

A name — an environment variable, a provider header, a config key — looks like a credential when it holds
one of :data:`CREDENTIAL_WORDS`, in any case. Every place that decides by name asks
:func:`looks_like_credential` (or, in free text, :data:`CREDENTIAL_NAME_IN_TEXT`):

- ``checks.runner.check_env`` drops such a variable from a check's environment, even from the allowlist;
- ``demo.typecheck`` drops it from the demo's ``npm install`` environment;
- ``protocol.config``: ``passEnv`` refuses such a name with its own message;
- ``policy.redact`` registers such a variable's value (when it looks secret) and such a provider header's
  value (always) for redaction — the same names the check's environment drops, so a value kept out of a
  check is never shown in a log line or an event either;
- ``context.digest`` masks the value after such a name in a project's config text.

``AUTH`` counts as in ``OAUTH_TOKEN``, ``NPM_CONFIG__AUTH``, ``Authorization`` or ``Authorisation``, not
as in ``AUTHOR`` (``GIT_AUTHOR_NAME``, ``GIT_AUTHOR_EMAIL`` are no credentials: registered for redaction,
a name or an e-mail address would be masked in every event). ``PASSWORD`` is also spelled ``PASSWD``.

Why this module sits in ``protocol/``: ``protocol/`` is the bottom layer and imports nothing internal,
and its ``passEnv`` validator needs the rule; a rule in ``policy/`` would make ``protocol`` import upward.
So the rule lives in this leaf (it imports only :mod:`re`), and ``spotpatch_agent.policy.credentials`` is
its face for every layer above: import it from there. ``tests/architecture/test_one_rule_each.py`` fails
when a list of these words is written anywhere else.
"""

from __future__ import annotations

import re

__all__ = ["CREDENTIAL_NAME_IN_TEXT", "CREDENTIAL_WORDS", "looks_like_credential"]

#: The words that make a name look like a credential (docs/security.md §1 and docs/configuration.md list
#: exactly these; a test compares them).
CREDENTIAL_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH", "COOKIE", "SIGNATURE")
#: How a word is matched where that is not the word itself.
_SPELLING = {"PASSWORD": "PASSW(?:OR)?D", "AUTH": "AUTH(?!OR(?!I[SZ]))"}
_NAME = re.compile("|".join(_SPELLING.get(word, word) for word in CREDENTIAL_WORDS), re.IGNORECASE)

#: A credential-looking key name in free text (a ``vite.config`` or ``.env.example`` the model is shown),
#: as a regular-expression source to embed (case-insensitive). The same words, except that a bare ``key``
#: is everywhere in such text (``key:``, ``primaryKey``, ``keyframes``): there only ``api_key``/``apiKey``
#: and ``private_key``/``privateKey`` count.
CREDENTIAL_NAME_IN_TEXT = r"[\w.-]*(?:{})[\w.-]*".format("|".join(
    "(?:api|private)[_-]?key" if word == "KEY" else _SPELLING.get(word, word).lower() for word in CREDENTIAL_WORDS))


def looks_like_credential(name: str) -> bool:
    """Whether ``name`` (a variable, header or config key name) holds one of :data:`CREDENTIAL_WORDS`."""
    return _NAME.search(name) is not None
