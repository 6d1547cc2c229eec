"""asvi-rates `figures`: see ../shared/DESIGN.md."""
