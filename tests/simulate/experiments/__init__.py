"""Tests of ``simulate.experiments``."""
