"""Tests of ``simulate.truths``."""
