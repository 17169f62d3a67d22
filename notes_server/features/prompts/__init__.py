"""Prompts: the `Prompt` seam (`base`) and the shipped notes prompts (`notes`)."""
