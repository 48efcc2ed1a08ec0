"""Stage 1: bytes to text the way Python reads a source file (BOM, coding cookie); newlines untouched."""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """A file that cannot be turned into text: reported as one TL900 diagnostic."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str  # as detected: "utf-8", "utf-8-sig" (BOM), "latin-1" (cookie) ...


def decode(data: bytes) -> Decoded:
    """Bytes to text the way Python itself reads a source file (BOM, coding cookie); newlines untouched."""
    if b"\0" in data:
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise SourceError("file contains null bytes; it is not Python source", line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        # A cookie naming a codec a package registers at start-up (`# -*- coding: future_fstrings -*-`): such codecs
        # read UTF-8 and rewrite it for older Pythons, so the UTF-8 text is what this Python would run.
        if str(exc).startswith("unknown encoding"):
            try:
                return Decoded(data.decode("utf-8"), "utf-8")
            except UnicodeDecodeError:
                pass
        raise SourceError(f"invalid encoding declaration: {exc}") from None
    try:
        return Decoded(data.decode(encoding), encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceError(f"cannot decode as {encoding}: byte 0x{data[exc.start]:02x} at line {line}", line) from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r}") from None
