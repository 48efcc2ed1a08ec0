"""The content hash that names a file's state in the caches (results and exports): cheap, and importing it costs
nothing, so a warm run never loads the analysis."""

from __future__ import annotations

import hashlib


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()
