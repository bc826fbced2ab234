"""The old path of run/parent/launch.py, kept while the CLI still imports it from here."""
from perfcore.run.parent.launch import check_command, run_child, run_command  # noqa: F401
