"""Local security policy: allowed paths, text detection, size bounds (docs/design.md §7)."""
