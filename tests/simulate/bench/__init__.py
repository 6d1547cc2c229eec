"""Tests of ``simulate.bench``."""
