"""Patch-text builders shared by the tool tests (``apply_patch``'s envelope)."""

from __future__ import annotations


def update(path: str, old: str, new: str, context: tuple[str, str] = ("one", "three")) -> str:
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -1,3 +1,3 @@\n {context[0]}\n-{old}\n+{new}\n {context[1]}\n"
    )


def create(path: str, *lines: str) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def delete(path: str, *lines: str) -> str:
    body = "".join(f"-{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n"
        f"@@ -1,{len(lines)} +0,0 @@\n{body}"
    )
