"""`python -m perfcore.cli ...`: the same as `perfcore ...`."""
from perfcore.cli import main

main()
