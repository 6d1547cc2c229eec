"""Tests of ``verify``."""
