"""Exporters: one small module per format (terminal text, HTML, ...)."""
