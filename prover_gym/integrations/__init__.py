"""Adapters to other training stacks (TRL's GRPOTrainer environments)."""
