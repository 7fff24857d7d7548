"""Byte-bounded caches of the server: table states, split results and remote bytes on disk."""
