"""compiled_breaks.py's model and loop, run from a file that also calls a Block's forward directly
(once, eagerly): under perfcore run the Block's forward is then timed as a direct call, and
torch.compile must still see exactly what it sees bare."""

import sys

import torch
from compiled_breaks import Block, main

Block().forward(torch.randn(2, 16))
main(sys.argv[1] if len(sys.argv) > 1 else "eager")
