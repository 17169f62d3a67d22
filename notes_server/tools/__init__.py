"""tools layer."""
