"""Command-line entry point; filled in below."""
def main() -> None:
    raise SystemExit("not yet")
