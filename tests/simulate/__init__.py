"""Tests of ``simulate``."""
