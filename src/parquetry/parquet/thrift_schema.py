"""The parts of ``parquet.thrift`` parquetry reads: field ids and their Thrift types.

A spec is a scalar type name (``"i8"``, ``"i16"``, ``"i32"``, ``"i64"``, ``"bool"``,
``"binary"``, ``"double"``), a struct (``{field_id: spec}``) or ``("list", element_spec)``.
The reader checks every field's wire type against its spec and drops fields that do not
match, as Thrift-generated readers do; so a fuzzed footer can never hand an integer to code
that iterates a list. The writer uses the exact integer widths to re-encode structures.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "COLUMN_META_DATA",
    "FILE_CRYPTO_META_DATA",
    "FILE_META_DATA",
    "PAGE_HEADER",
    "REQUIRED",
    "Spec",
]

Spec = Any  # str | dict[int, Spec] | tuple[str, Spec]

_EMPTY: dict[int, Any] = {}

_KEY_VALUE = {1: "binary", 2: "binary"}
_STATISTICS = {
    1: "binary",
    2: "binary",
    3: "i64",
    4: "i64",
    5: "binary",
    6: "binary",
    7: "bool",
    8: "bool",
}
_TIME_UNIT = {1: _EMPTY, 2: _EMPTY, 3: _EMPTY}
_TIME = {1: "bool", 2: _TIME_UNIT}
_LOGICAL_TYPE = {
    1: _EMPTY,  # STRING
    2: _EMPTY,  # MAP
    3: _EMPTY,  # LIST
    4: _EMPTY,  # ENUM
    5: {1: "i32", 2: "i32"},  # DECIMAL(scale, precision)
    6: _EMPTY,  # DATE
    7: _TIME,
    8: _TIME,  # TIMESTAMP
    10: {1: "i8", 2: "bool"},  # INTEGER(bitWidth, isSigned)
    11: _EMPTY,  # UNKNOWN
    12: _EMPTY,  # JSON
    13: _EMPTY,  # BSON
    14: _EMPTY,  # UUID
    15: _EMPTY,  # FLOAT16
    16: {1: "i8"},  # VARIANT
    17: {1: "binary"},  # GEOMETRY(crs)
    18: {1: "binary", 2: "i32"},  # GEOGRAPHY(crs, algorithm)
}
_SCHEMA_ELEMENT = {
    1: "i32",  # type
    2: "i32",  # type_length
    3: "i32",  # repetition_type
    4: "binary",  # name
    5: "i32",  # num_children
    6: "i32",  # converted_type
    7: "i32",  # scale
    8: "i32",  # precision
    9: "i32",  # field_id
    10: _LOGICAL_TYPE,
}
_PAGE_ENCODING_STATS = {1: "i32", 2: "i32", 3: "i32"}
_SIZE_STATISTICS = {1: "i64", 2: ("list", "i64"), 3: ("list", "i64")}
COLUMN_META_DATA = {
    1: "i32",  # type
    2: ("list", "i32"),  # encodings
    3: ("list", "binary"),  # path_in_schema
    4: "i32",  # codec
    5: "i64",  # num_values
    6: "i64",  # total_uncompressed_size
    7: "i64",  # total_compressed_size
    8: ("list", _KEY_VALUE),
    9: "i64",  # data_page_offset
    10: "i64",  # index_page_offset
    11: "i64",  # dictionary_page_offset
    12: _STATISTICS,
    13: ("list", _PAGE_ENCODING_STATS),
    14: "i64",  # bloom_filter_offset
    15: "i32",  # bloom_filter_length
    16: _SIZE_STATISTICS,
}
_COLUMN_CRYPTO = {1: _EMPTY, 2: {1: ("list", "binary"), 2: "binary"}}
_COLUMN_CHUNK = {
    1: "binary",  # file_path
    2: "i64",  # file_offset
    3: COLUMN_META_DATA,
    4: "i64",  # offset_index_offset
    5: "i32",
    6: "i64",  # column_index_offset
    7: "i32",
    8: _COLUMN_CRYPTO,
    9: "binary",  # encrypted_column_metadata
}
_SORTING_COLUMN = {1: "i32", 2: "bool", 3: "bool"}
_ROW_GROUP = {
    1: ("list", _COLUMN_CHUNK),
    2: "i64",  # total_byte_size
    3: "i64",  # num_rows
    4: ("list", _SORTING_COLUMN),
    5: "i64",  # file_offset
    6: "i64",  # total_compressed_size
    7: "i16",  # ordinal
}
_AES = {1: "binary", 2: "binary", 3: "bool"}  # aad_prefix, aad_file_unique, supply_aad_prefix
_ENCRYPTION_ALGORITHM = {1: _AES, 2: _AES}  # AES_GCM_V1, AES_GCM_CTR_V1
FILE_META_DATA = {
    1: "i32",  # version
    2: ("list", _SCHEMA_ELEMENT),
    3: "i64",  # num_rows
    4: ("list", _ROW_GROUP),
    5: ("list", _KEY_VALUE),
    6: "binary",  # created_by
    7: ("list", {1: _EMPTY}),  # column_orders
    8: _ENCRYPTION_ALGORITHM,
    9: "binary",  # footer_signing_key_metadata
}
FILE_CRYPTO_META_DATA = {1: _ENCRYPTION_ALGORITHM, 2: "binary"}
_DATA_PAGE_HEADER = {1: "i32", 2: "i32", 3: "i32", 4: "i32", 5: _STATISTICS}
_DATA_PAGE_HEADER_V2 = {
    1: "i32",
    2: "i32",
    3: "i32",
    4: "i32",
    5: "i32",
    6: "i32",
    7: "bool",
    8: _STATISTICS,
}
PAGE_HEADER = {
    1: "i32",  # type
    2: "i32",  # uncompressed_page_size
    3: "i32",  # compressed_page_size
    4: "i32",  # crc
    5: _DATA_PAGE_HEADER,
    6: _EMPTY,  # index_page_header
    7: {1: "i32", 2: "i32", 3: "bool"},  # dictionary_page_header
    8: _DATA_PAGE_HEADER_V2,
}

#: The fields ``parquet.thrift`` marks ``required``, by struct spec (keyed by ``id``: the
#: specs are module-level singletons). Thrift-generated readers (pyarrow's) refuse a struct
#: missing one; parquetry's reader keeps whatever is there, so callers that trust it check.
REQUIRED: dict[int, tuple[int, ...]] = {
    id(FILE_META_DATA): (1, 2, 3, 4),  # version, schema, num_rows, row_groups
    id(_SCHEMA_ELEMENT): (4,),  # name
    id(_KEY_VALUE): (1,),  # key
    id(_TIME): (1, 2),  # isAdjustedToUTC, unit (TIME and TIMESTAMP)
    id(_LOGICAL_TYPE[5]): (1, 2),  # DECIMAL scale, precision
    id(_LOGICAL_TYPE[10]): (1, 2),  # INTEGER bitWidth, isSigned
    id(_ROW_GROUP): (1, 2, 3),  # columns, total_byte_size, num_rows
    id(_SORTING_COLUMN): (1, 2, 3),
    id(_COLUMN_CHUNK): (2,),  # file_offset
    id(_COLUMN_CRYPTO[2]): (1,),  # path_in_schema
    # type, encodings, path_in_schema, codec, num_values, sizes, data_page_offset
    id(COLUMN_META_DATA): (1, 2, 3, 4, 5, 6, 7, 9),
    id(_PAGE_ENCODING_STATS): (1, 2, 3),  # page_type, encoding, count
    id(PAGE_HEADER): (1, 2, 3),
    id(_DATA_PAGE_HEADER): (1, 2, 3, 4),
    id(_DATA_PAGE_HEADER_V2): (1, 2, 3, 4, 5, 6),
    id(PAGE_HEADER[7]): (1, 2),  # dictionary page: num_values, encoding
}
