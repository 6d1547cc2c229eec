"""Tests of ``simulate.core``."""
