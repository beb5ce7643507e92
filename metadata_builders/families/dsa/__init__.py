"""The DSA family (placeholder; the package's table lands with its modules)."""
