"""Tests of ``simulate.references``."""
