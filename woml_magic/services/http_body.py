"""Reading a response body with its size bounded after decompression (spec §4.1, §4.5).

httpx inflates each chunk it reads in one go, so a 255 KiB gzip body that inflates to
256 MiB would sit in the kernel before any cap saw it. Here the raw (still encoded)
bytes are read and inflated at most ``CHUNK`` bytes at a time, and the count that is
checked is the inflated one: a decompression bomb costs the kernel the cap, no more.

Supported encodings are those the client asks for (``Accept-Encoding: gzip,
deflate``) and ``identity``; a body in any other encoding is refused unread.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator

import httpx

#: Inflate at most this many bytes per step.
CHUNK = 64 * 1024
ACCEPT_ENCODING = "gzip, deflate"


class BodyTooLarge(Exception):
    """The body passed the cap (counted after decompression)."""


class UnsupportedEncoding(Exception):
    """The body is in a ``Content-Encoding`` this client cannot read safely."""


class _Inflater:
    """One ``Content-Encoding`` (gzip or deflate), inflated with bounded output."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._raw_fallback = encoding == "deflate"
        wbits = zlib.MAX_WBITS | 16 if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._z = zlib.decompressobj(wbits)
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Inflate ``data`` lazily, in pieces of at most ``CHUNK`` bytes: the caller
        counts them and stops, so the inflated whole never exists at once."""
        buffer = data
        while True:
            try:
                piece = self._z.decompress(buffer, CHUNK)
            except zlib.error:
                if not (self._raw_fallback and not self._started):
                    raise
                # "deflate" bodies are often raw DEFLATE without the zlib header.
                self._raw_fallback = False
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            self._started = True
            buffer = self._z.unconsumed_tail
            if piece:
                yield piece
            if self._z.eof or (not buffer and len(piece) < CHUNK):
                return


async def read_body(response: httpx.Response, max_bytes: int) -> bytes:
    """The decoded body, or ``BodyTooLarge`` as soon as it passes ``max_bytes``.

    Raises ``UnsupportedEncoding`` for an encoding other than gzip, deflate or identity,
    and ``httpx.DecodingError`` for a body that does not inflate.
    """
    header = response.headers.get("content-encoding", "")
    encodings = [e.strip().lower() for e in header.split(",") if e.strip()]
    encodings = [e for e in encodings if e != "identity"]
    if len(encodings) > 1 or (encodings and encodings[0] not in ("gzip", "x-gzip", "deflate")):
        raise UnsupportedEncoding(header)
    if response.is_stream_consumed:
        # Read when it was made (``httpx.Response(content=...)``, as a MockTransport's
        # handler answers): httpx decoded it then, in memory; the cap is left to apply.
        if len(response.content) > max_bytes:
            raise BodyTooLarge
        return response.content
    inflater = _Inflater(encodings[0]) if encodings else None
    chunks: list[bytes] = []
    size = 0
    try:
        async for raw in _raw(response):
            for piece in inflater.feed(raw) if inflater is not None else (raw,):
                size += len(piece)
                if size > max_bytes:
                    raise BodyTooLarge
                chunks.append(piece)
    except zlib.error as error:
        raise httpx.DecodingError(
            f"the body is not valid {encodings[0]}: {error}", request=response.request
        ) from None
    return b"".join(chunks)


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    async for raw in response.aiter_raw():
        yield raw
