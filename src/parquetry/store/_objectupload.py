"""Streaming writes of :class:`~parquetry.store.objectstore.ObjectStore` (``open_writer``):
one PUT up to :data:`PART_BYTES`, a multipart upload beyond (see :class:`ObjectUpload`).

Why a large ``CREATE`` is checked by HEADs, not by its completion: obstore 0.12 has no put
mode for multipart uploads (object_store's ``PutMultipartOpts`` has none either, its issue
#289). The one conditional multipart path it has is S3's ``copy_if_not_exists="multipart"``
(a multipart *copy* completed with ``If-None-Match``): using it would mean uploading to a
staging key that listings show, copying every byte a second time and a client option users
must set, for a race parquetry's own writes cannot meet (they stream only to random keys).
docs/concepts.md ("Guarantees") states the limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import obstore

from parquetry.errors import AlreadyExists
from parquetry.store._objectstore_errors import _Translate
from parquetry.store.base import ObjectMeta, PutMode
from parquetry.store.writer import Upload

if TYPE_CHECKING:
    from parquetry.store.objectstore import ObjectStore

__all__ = ["PART_BYTES", "UPLOAD_CONCURRENCY", "ObjectUpload"]

#: A streamed object up to this size is sent as one (conditional) PUT at commit; a larger one
#: as a multipart upload in parts of this size (S3's minimum part is 5 MiB).
PART_BYTES = 8 * 1024 * 1024
#: Parts of one streamed object in flight at once (each holds ``PART_BYTES`` of memory).
UPLOAD_CONCURRENCY = 2


class _Aborted(Exception):
    """Passed to obstore's writer ``__exit__``: the way to make it abort its upload."""


class ObjectUpload(Upload):
    """A streamed object: gathered up to ``PART_BYTES`` and then sent as one PUT with the
    write's mode (exactly ``put``'s semantics), or, when larger, a multipart upload
    (obstore's ``open_writer``; at most ``UPLOAD_CONCURRENCY + 1`` parts in memory).

    A multipart upload is invisible until completed and aborted on failure. Its completion
    is unconditional in obstore 0.12, so a large create-if-absent checks the key with a HEAD
    before the first part and again before completing: a concurrent creator of the same key
    in between is not detected (the last completion wins). Callers that stream large
    objects with ``CREATE`` use unique keys (data files have random names). Compare-and-swap
    writes stay single PUTs: the object is gathered whole in memory. A killed process leaves
    an incomplete multipart upload: invisible, billed until the bucket's lifecycle rule
    (``AbortIncompleteMultipartUpload``; GCS and Azure expire them on their own) removes it.
    """

    def __init__(self, store: ObjectStore, key: str, mode: PutMode, expected: str | None):
        self.store, self.key, self.mode, self.expected = store, key, mode, expected
        self.buffer = bytearray()
        self.file: Any = None  # obstore's WritableFile once the object outgrew one PUT

    def write(self, data: memoryview) -> None:
        if self.file is None:
            self.buffer += data
            if len(self.buffer) <= PART_BYTES or self.mode is PutMode.UPDATE:
                return
            data, self.buffer = memoryview(self.buffer), bytearray()
            if self.mode is PutMode.CREATE:
                self._refuse_existing()
            with _Translate(self.store, self.key):
                self.file = obstore.open_writer(
                    self.store._client,
                    self.key,
                    buffer_size=PART_BYTES,
                    max_concurrency=UPLOAD_CONCURRENCY,
                )
        try:
            with _Translate(self.store, self.key):
                self.file.write(data)
        except BaseException:
            self.abort()
            raise

    def _refuse_existing(self) -> None:
        if self.store._exists(self.key):
            self.abort()
            raise AlreadyExists(
                f"{self.key!r} already exists in {self.store.url}",
                key=self.key,
                store=self.store.url,
            )

    def commit(self) -> ObjectMeta:
        if self.file is None:
            data, self.buffer = bytes(self.buffer), bytearray()
            return self.store._put(self.key, data, self.mode, self.expected)
        try:
            if self.mode is PutMode.CREATE:
                self._refuse_existing()
            with _Translate(self.store, self.key):
                self.file.close()  # completes the multipart upload
        except BaseException:
            self.abort()
            raise
        self.file = None
        return self.store._head(self.key)

    def abort(self) -> None:
        self.buffer = bytearray()
        file, self.file = self.file, None
        if file is not None:
            try:
                file.__exit__(_Aborted, _Aborted(), None)  # obstore aborts the upload
            except Exception:  # best effort: the bucket's lifecycle rule covers the rest
                return
