"""pytest plugin (filled in by the properties issue)."""
