"""`python -m notes_server`: the same command line as the `notes-server` script."""

from notes_server.cli.main import main

if __name__ == "__main__":
    main(prog_name="notes-server")
