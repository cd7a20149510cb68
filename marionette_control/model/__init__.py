"""Mechanics API: build tree models from Python (the builder), YAML and URDF."""

from marionette_control.model.builder import DEFAULT_FORCING, FORCING_RULES, SystemBuilder, rotation_rpy

__all__ = ["DEFAULT_FORCING", "FORCING_RULES", "SystemBuilder", "rotation_rpy"]
