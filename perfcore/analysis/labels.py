"""The five labels a step's wall time is split into, in report order. A leaf: every layer that names a
label (attribution, the uncertainty of each share, the report, the run's outcome) takes them from here."""

__all__ = ["LABELS"]

LABELS = ("load", "transfer", "compute", "comm", "host")
