"""Local security policy: allowed paths, text detection, size bounds (DESIGN.md §7)."""
