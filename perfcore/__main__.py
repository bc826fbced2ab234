"""`python -m perfcore ...`: the same as `perfcore ...`."""
from perfcore.cli import main

main()
