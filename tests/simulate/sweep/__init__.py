"""Tests of ``simulate.sweep``."""
