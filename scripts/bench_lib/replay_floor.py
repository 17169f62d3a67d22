"""The stdio floor: a bare Python process that parses each request line (`json.loads`) and
writes back the exact reply bytes notes-server sent for that request, recorded beforehand.
Nothing else: no validation, no dispatch, no database. Reads and writes as notes-server's stdio
transport does (`sys.stdin.buffer` lines, one `write` + `flush` per reply).

Usage: replay_floor.py REPLIES_FILE  (JSON lines: {"method": ..., "id": ..., "reply": "..."})
"""

import json
import sys


def main() -> None:
    replies = {}
    with open(sys.argv[1], "rb") as source:
        for record_line in source:
            record = json.loads(record_line)
            replies[record["method"], record["id"]] = record["reply"].encode().rstrip(b"\n") + b"\n"
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    for line in stdin:
        message = json.loads(line)
        stdout.write(replies[message["method"], message["id"]])
        stdout.flush()


if __name__ == "__main__":
    main()
