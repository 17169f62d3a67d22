"""security layer."""
