"""Tests of ``theory``."""
