"""Measurement: the timing protocol, input generation, and reports."""
