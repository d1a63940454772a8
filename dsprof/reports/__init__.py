"""Tables and plots of measurements, LUTs and merged models (issue #7)."""
