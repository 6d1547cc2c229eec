"""asvi-rates `verify`: see ../shared/DESIGN.md."""
