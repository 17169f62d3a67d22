"""Plain-markdown folders: a race-free walker, front matter, import, export and sync.

Everything on disk is reached relative to one directory descriptor opened once, never by
re-resolving a path string, so a symlink swapped in mid-walk cannot lead outside the folder.
"""
