"""Blueprints, one per API surface."""
