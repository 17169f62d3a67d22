"""The floor for the HTTP figures: a minimal ASGI app that answers every POST with the same
bytes notes-server sent for one `notes_read`, on the same server stack (uvicorn with httptools
and uvloop, one worker, TCP_NODELAY). No routing, no checks, no database: what is left between
it and notes-server is the cost of our own code.

Usage: http_floor.py PORT REPLY_FILE
"""

import sys

import uvicorn

REPLY = b""
HEADERS = [(b"content-type", b"application/json")]


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": REPLY})


def main() -> None:
    global REPLY, HEADERS
    port, reply_file = sys.argv[1:3]
    with open(reply_file, "rb") as source:
        REPLY = source.read()
    HEADERS = [*HEADERS, (b"content-length", str(len(REPLY)).encode())]
    uvicorn.run(app, host="127.0.0.1", port=int(port), http="httptools", log_level="warning")


if __name__ == "__main__":
    main()
