"""The protocol-overhead floor: read a line, write a canned reply line. No parsing at all.

Usage: echo.py CANNED_FILE  (the reply bytes, one line, e.g. notes-server's own tools/list reply)
"""

import sys


def main() -> None:
    with open(sys.argv[1], "rb") as canned_file:
        canned = canned_file.read().rstrip(b"\n") + b"\n"
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    for _line in stdin:
        stdout.write(canned)
        stdout.flush()


if __name__ == "__main__":
    main()
