"""asvi-rates `simulate`: see ../shared/DESIGN.md."""
