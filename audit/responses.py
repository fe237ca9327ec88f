"""Reading an HTTP answer whole, but never more of it than a client is willing to hold: a
misbehaving server (or a proxy's error page in a loop) must not fill the memory."""
from __future__ import annotations

import requests


class OversizeResponse(Exception):
    """The answer is over the limit; the message says by how much, for the caller to place."""


def read_limited(response: requests.Response, limit: int) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limit:
        response.close()
        raise OversizeResponse(f"response of {int(declared)} bytes is over the limit of {limit} bytes")
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=1 << 16):
        size += len(chunk)
        if size > limit:
            response.close()
            raise OversizeResponse(f"response is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
