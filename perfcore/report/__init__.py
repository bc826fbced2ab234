"""Reports: one small module per format (terminal text, HTML, plots, Chrome trace, JSON)."""
