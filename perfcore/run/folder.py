"""The old path of run/parent/folder.py, kept while the CLI still imports it from here."""
from perfcore.run.parent.folder import prepare_out, reuse_out  # noqa: F401
