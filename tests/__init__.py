"""The test suite; its folders mirror the packages."""
