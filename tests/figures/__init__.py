"""Tests of ``figures``."""
