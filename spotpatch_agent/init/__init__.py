"""`spotpatch-agent init`: wires SpotPatch into an existing Vite app (docs/adopt.md)."""
