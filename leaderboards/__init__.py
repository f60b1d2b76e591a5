"""leaderboards: see DESIGN.md (lands with its issue)."""
