"""The extension seam: what an extension contributes (`base`), how contributions are composed
(`registry`), and how resource requests are routed by URI scheme (`resources`)."""
