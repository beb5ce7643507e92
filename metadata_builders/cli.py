"""Command line (filled in by the properties issue)."""


def main(argv=None) -> int:
    return 0
