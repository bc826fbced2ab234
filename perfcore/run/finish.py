"""The old path of run/parent/finish.py, kept while the CLI still imports it from here."""
from perfcore.run.parent.finish import finish_run, merge_dirs  # noqa: F401
