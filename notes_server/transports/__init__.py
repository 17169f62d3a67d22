"""transports layer."""
