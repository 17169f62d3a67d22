"""Benchmarks for notes-server against an equivalent server built on the official MCP SDK.

Entry point: `scripts/bench` (see BENCHMARKS.md). A bench-only package: nothing in
`notes_server` imports it, and it needs the `bench` extra (`pip install -e '.[bench]'`).
"""
