"""judges: see DESIGN.md (lands with its issue)."""
