"""Mechanics API: build tree models from Python (the builder), YAML and URDF."""

from marionette_control.model.builder import SystemBuilder, rotation_rpy

__all__ = ["SystemBuilder", "rotation_rpy"]
