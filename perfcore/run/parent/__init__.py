"""The parent side of `perfcore run`: launch the child, watch its progress, finish its parts into a run folder."""
