"""The extension seam and the features that plug into it: what an extension contributes
(`extension`), how contributions are composed (`registry`), how resource requests are routed by
URI scheme (`resources`), and one package per feature (apps, purge, folders, oauth, prompts).
`app.py` composes them; `tools/` knows none of them."""
