"""Trajectory optimization and tracking for string-actuated marionettes."""

__version__ = "0.1.0"
