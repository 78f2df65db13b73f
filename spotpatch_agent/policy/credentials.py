"""What looks like a credential, by its name: the one rule, for every layer above ``protocol/``.

The rule itself (:data:`CREDENTIAL_WORDS`, :func:`looks_like_credential`, :data:`CREDENTIAL_NAME_IN_TEXT`)
lives in :mod:`spotpatch_agent.protocol.credentials`, a leaf with no internal imports, because ``protocol``'s
``passEnv`` validator needs it too and ``protocol`` may import nothing above it (its docstring says more).
This module is its face: the check environment, the demo, redaction and the context digest import it here.
"""

from __future__ import annotations

from spotpatch_agent.protocol.credentials import CREDENTIAL_NAME_IN_TEXT, CREDENTIAL_WORDS, looks_like_credential

__all__ = ["CREDENTIAL_NAME_IN_TEXT", "CREDENTIAL_WORDS", "looks_like_credential"]
