"""`notes_reindex`: embed a workspace's notes again, as a task where the client allows one."""
