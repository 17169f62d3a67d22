"""legacy layer."""
