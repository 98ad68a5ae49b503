"""Placeholder; replaced by the real command line."""
def main():
    raise SystemExit("lfc: not yet built")
