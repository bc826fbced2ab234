"""The columnar store of steps and spans, the one attribution, verdicts and advice, rank merge and run comparison: pure functions on tables."""
