"""The floor for the HTTP figures: a minimal ASGI app that answers every POST with the same
bytes notes-server sent for one `notes_read`, on the same server stack (uvicorn with httptools
and uvloop, one worker, TCP_NODELAY). No routing, no checks, no database: what is left between
it and notes-server is the cost of our own code. The request's id is spliced into the reply
(two byte searches), so that the load client can check ids here as everywhere.

Usage: http_floor.py PORT REPLY_FILE
"""

import sys

import uvicorn

HEADERS = [(b"content-type", b"application/json")]
PREFIX, SUFFIX = b"", b""


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    start = body.find(b'"id":') + 5
    request_id = body[start : body.find(b",", start)]
    reply = PREFIX + request_id + SUFFIX
    headers = [*HEADERS, (b"content-length", str(len(reply)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": reply})


def main() -> None:
    global PREFIX, SUFFIX
    port, reply_file = sys.argv[1:3]
    with open(reply_file, "rb") as source:
        reply = source.read()
    start = reply.index(b'"id":') + 5
    PREFIX, SUFFIX = reply[:start], reply[reply.index(b",", start) :]
    uvicorn.run(app, host="127.0.0.1", port=int(port), http="httptools", log_level="warning")


if __name__ == "__main__":
    main()
