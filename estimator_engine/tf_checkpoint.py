"""Reads TensorFlow checkpoints (TensorBundle V2) without TensorFlow.

A TF checkpoint ``<prefix>`` is two kinds of files::

    <prefix>.index                    an SSTable (LevelDB's table format): key "" -> BundleHeaderProto,
                                      then variable name -> BundleEntryProto, sorted by key
    <prefix>.data-00000-of-0000N      the tensors' bytes, at (shard_id, offset, size) of each entry

An entry carries the dtype, shape, masked CRC32C of the bytes and, for a partitioned variable
(``tf.compat.v1.fixed_size_partitioner``: ``.../part_0``, ``part_1``, ... in the graph), the
slices it is made of; each slice is its own entry under an OrderedCode key (``EncodeTensorNameSlice``).
``TFCheckpoint.read`` returns the full tensor, as ``tf.train.load_variable`` does.

Why parts are written here: no maintained Python package reads TF's SSTable blocks or the
OrderedCode slice keys (the LevelDB bindings need the C library and a whole database, not one
table file); both are small fixed formats (``tensorflow/core/lib/io/{format,block}.cc``,
``core/lib/strings/ordered_code.cc``). The two protos are decoded by the protobuf runtime the
engine already has (through tensorboardX), from descriptors built below. Checksums use
``google_crc32c`` when it is installed (the ``tf-checkpoints`` extra; C code, measured 0.04 s for
100 MB), else a pure-Python table (measured ~3 MB/s, ~34 s for 100 MB: fine for Estimator models of
a few MB, slow for hundreds).

Example:
    >>> reader = TFCheckpoint("/path/to/model_dir/model.ckpt-100")  # doctest: +SKIP
    >>> reader.shapes()["dnn/hiddenlayer_0/kernel"]  # doctest: +SKIP
    [4, 10]
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from estimator_engine.errors import CheckpointError

__all__ = ["TFCheckpoint", "crc32c", "is_tf_checkpoint", "masked_crc32c", "saved_model_prefix"]

logger = logging.getLogger(__name__)

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_SIZE = 48
_BLOCK_TRAILER = 5  # compression type byte + masked crc32c
_HEADER_KEY = b""

# DataType enum (tensorflow/core/framework/types.proto) -> numpy; bfloat16 (14) is read as
# float32 (numpy has no bfloat16; every bfloat16 value is exactly a float32).
_DTYPES: dict[int, Any] = {
    1: np.float32, 2: np.float64, 3: np.int32, 4: np.uint8, 5: np.int16, 6: np.int8,
    7: object, 8: np.complex64, 9: np.int64, 10: np.bool_, 11: np.int8, 12: np.uint8,
    13: np.int32, 14: "bfloat16", 15: np.int16, 16: np.uint16, 17: np.uint16, 18: np.complex128,
    19: np.float16, 22: np.uint32, 23: np.uint64,
}
_DTYPE_NAMES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
                7: "string", 8: "complex64", 9: "int64", 10: "bool", 11: "qint8", 12: "quint8",
                13: "qint32", 14: "bfloat16", 15: "qint16", 16: "quint16", 17: "uint16",
                18: "complex128", 19: "float16", 20: "resource", 21: "variant", 22: "uint32",
                23: "uint64"}


# ---------------------------------------------------------------------------------------------
# CRC32C (Castagnoli), masked as LevelDB/TF store it


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc_table()


def _python_extend(crc: int, data: bytes | memoryview) -> int:
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _extend_function() -> Callable[[int, bytes | memoryview], int]:
    try:
        import google_crc32c  # the `tf-checkpoints` extra: C implementation
    except ImportError:
        logger.info("google-crc32c is not installed: TF checkpoint checksums are verified in pure "
                    "Python (~3 MB/s). pip install 'estimator-workbench[tf-checkpoints]' for ~2 GB/s.")
        return _python_extend
    if getattr(google_crc32c, "implementation", "c") != "c":
        return _python_extend  # its own pure-Python fallback is no faster than ours
    return lambda crc, data: int(google_crc32c.extend(crc, bytes(data)))


_extend: list[Callable[[int, bytes | memoryview], int]] = []  # chosen on first use (import cost)


def crc32c(data: bytes | memoryview, crc: int = 0) -> int:
    """CRC32C of ``data`` (continuing ``crc``).

    Example:
        >>> hex(crc32c(b"123456789"))
        '0xe3069283'
    """
    if not _extend:
        _extend.append(_extend_function())
    return _extend[0](crc, data)


def masked_crc32c(crc: int) -> int:
    """LevelDB's masking of a stored CRC (so a CRC of data holding CRCs stays informative)."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# The two protos, decoded by the protobuf runtime from descriptors built here


def _message_classes() -> dict[str, Any]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(
        name="estimator_engine/tf_tensor_bundle.proto", package="estimator_engine.tf",
        syntax="proto3")
    F = descriptor_pb2.FieldDescriptorProto

    def message(name: str, fields: list[tuple[str, int, int, int, str]],
                parent: Any = None) -> Any:
        proto = (parent.nested_type if parent is not None else file.message_type).add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = proto.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name
        return proto

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    shape = message("TensorShapeProto", [
        ("dim", 2, F.TYPE_MESSAGE, rep, ".estimator_engine.tf.TensorShapeProto.Dim"),
        ("unknown_rank", 3, F.TYPE_BOOL, opt, "")])
    message("Dim", [("size", 1, F.TYPE_INT64, opt, ""), ("name", 2, F.TYPE_STRING, opt, "")],
            shape)
    tensor_slice = message("TensorSliceProto", [
        ("extent", 1, F.TYPE_MESSAGE, rep, ".estimator_engine.tf.TensorSliceProto.Extent")])
    extent = message("Extent", [("start", 1, F.TYPE_INT64, opt, ""),
                                ("length", 2, F.TYPE_INT64, opt, "")], tensor_slice)
    extent.oneof_decl.add(name="has_length")
    extent.field[1].oneof_index = 0
    message("VersionDef", [("producer", 1, F.TYPE_INT32, opt, ""),
                           ("min_consumer", 2, F.TYPE_INT32, opt, ""),
                           ("bad_consumers", 3, F.TYPE_INT32, rep, "")])
    # Enums (DataType, Endianness) as int32: the same wire format, no enum tables to keep.
    message("BundleHeaderProto", [
        ("num_shards", 1, F.TYPE_INT32, opt, ""), ("endianness", 2, F.TYPE_INT32, opt, ""),
        ("version", 3, F.TYPE_MESSAGE, opt, ".estimator_engine.tf.VersionDef")])
    message("BundleEntryProto", [
        ("dtype", 1, F.TYPE_INT32, opt, ""),
        ("shape", 2, F.TYPE_MESSAGE, opt, ".estimator_engine.tf.TensorShapeProto"),
        ("shard_id", 3, F.TYPE_INT32, opt, ""), ("offset", 4, F.TYPE_INT64, opt, ""),
        ("size", 5, F.TYPE_INT64, opt, ""), ("crc32c", 6, F.TYPE_FIXED32, opt, ""),
        ("slices", 7, F.TYPE_MESSAGE, rep, ".estimator_engine.tf.TensorSliceProto")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    classes = {}
    for name in ("BundleHeaderProto", "BundleEntryProto"):
        descriptor = pool.FindMessageTypeByName(f"estimator_engine.tf.{name}")
        get_class = getattr(message_factory, "GetMessageClass", None)
        classes[name] = (get_class(descriptor) if get_class is not None  # protobuf >= 4.21
                         else message_factory.MessageFactory(pool).GetPrototype(descriptor))
    return classes


_CLASSES: dict[str, Any] = {}


def _proto(name: str) -> Any:
    if not _CLASSES:
        _CLASSES.update(_message_classes())
    return _CLASSES[name]


# ---------------------------------------------------------------------------------------------
# SSTable (LevelDB table format, as tensorflow/core/lib/io/table writes it)


def _varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError(f"bad varint in {where}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _block(data: bytes, offset: int, size: int, where: str) -> bytes:
    end = offset + size + _BLOCK_TRAILER
    if offset < 0 or end > len(data):
        raise ValueError(f"{where} at bytes {offset}..{end} lies past the end of the file "
                         f"({len(data)} bytes): the file is truncated")
    contents = data[offset:offset + size]
    kind = data[offset + size]
    stored = struct.unpack_from("<I", data, offset + size + 1)[0]
    if masked_crc32c(crc32c(data[offset:offset + size + 1])) != stored:
        raise ValueError(f"checksum mismatch in {where} (bytes {offset}..{end}): the file is "
                         "corrupt")
    if kind != 0:
        raise ValueError(f"{where} is compressed (type {kind}); TF writes checkpoint indexes "
                         "uncompressed, so this is not a TF checkpoint index")
    return contents


def _block_entries(block: bytes, where: str) -> list[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise ValueError(f"{where} is too short")
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    limit = len(block) - 4 - 4 * restarts
    if limit < 0:
        raise ValueError(f"{where} has a bad restart count")
    entries: list[tuple[bytes, bytes]] = []
    key = b""
    pos = 0
    while pos < limit:
        shared, pos = _varint(block, pos, where)
        unshared, pos = _varint(block, pos, where)
        value_size, pos = _varint(block, pos, where)
        if shared > len(key) or pos + unshared + value_size > limit:
            raise ValueError(f"{where} holds a malformed entry")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        entries.append((key, block[pos:pos + value_size]))
        pos += value_size
    return entries


def _read_table(data: bytes) -> list[tuple[bytes, bytes]]:
    if len(data) < _FOOTER_SIZE:
        raise ValueError(f"it is {len(data)} bytes long, shorter than an SSTable footer "
                         f"({_FOOTER_SIZE}): the file is truncated or not a TF checkpoint index")
    magic = struct.unpack_from("<Q", data, len(data) - 8)[0]
    if magic != _TABLE_MAGIC:
        raise ValueError("it does not end in the SSTable magic number: the file is truncated "
                         "or not a TF checkpoint index")
    footer = data[len(data) - _FOOTER_SIZE:]
    _, pos = _varint(footer, 0, "the footer")  # metaindex offset
    _, pos = _varint(footer, pos, "the footer")  # metaindex size
    index_offset, pos = _varint(footer, pos, "the footer")
    index_size, pos = _varint(footer, pos, "the footer")
    entries: list[tuple[bytes, bytes]] = []
    for _, handle in _block_entries(_block(data, index_offset, index_size, "the index block"),
                                    "the index block"):
        offset, pos = _varint(handle, 0, "a block handle")
        size, _ = _varint(handle, pos, "a block handle")
        entries.extend(_block_entries(_block(data, offset, size, "a data block"), "a data block"))
    return entries


# ---------------------------------------------------------------------------------------------
# Slice keys (tensorflow/core/util/saved_tensor_slice_util.cc EncodeTensorNameSlice)


def _ordered_unsigned(value: int) -> bytes:
    payload = value.to_bytes((value.bit_length() + 7) // 8, "big") if value else b""
    return bytes([len(payload)]) + payload


_HEADER_BITS = [(0, 0), (0x80, 0), (0xC0, 0), (0xE0, 0), (0xF0, 0), (0xF8, 0), (0xFC, 0),
                (0xFE, 0), (0xFF, 0), (0xFF, 0x80), (0xFF, 0xC0)]


def _ordered_signed(value: int) -> bytes:
    magnitude = ~value if value < 0 else value
    if magnitude < 64:
        return bytes([(0x80 ^ value) & 0xFF])
    length = magnitude.bit_length() // 7 + 1
    sign = b"\xff\xff" if value < 0 else b"\x00\x00"
    buffer = bytearray(sign + (value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big"))
    begin = len(buffer) - length
    buffer[begin] ^= _HEADER_BITS[length][0]
    buffer[begin + 1] ^= _HEADER_BITS[length][1]
    return bytes(buffer[begin:])


def _escape_name(name: bytes) -> bytes:
    out = bytearray()
    for byte in name:
        out += b"\x00\xff" if byte == 0 else b"\xff\x00" if byte == 0xFF else bytes([byte])
    return bytes(out) + b"\x00\x01"


def _slice_key(name: bytes, extents: list[tuple[int, int]]) -> bytes:
    key = _ordered_unsigned(0) + _escape_name(name) + _ordered_unsigned(len(extents))
    for start, length in extents:
        key += _ordered_signed(0 if length == -1 else start) + _ordered_signed(length)
    return key


# ---------------------------------------------------------------------------------------------
# The reader


def is_tf_checkpoint(prefix: str) -> bool:
    """Whether ``prefix`` names a TF (V2) checkpoint: ``<prefix>.index`` exists."""
    return os.path.isfile(prefix + ".index")


def saved_model_prefix(path: str) -> str | None:
    """The checkpoint prefix of a SavedModel dir or its ``variables/`` folder, else ``None``."""
    for candidate in (os.path.join(path, "variables", "variables"), os.path.join(path, "variables")):
        if os.path.isfile(candidate + ".index"):
            return candidate
    return None


class TFCheckpoint:
    """One TF V2 checkpoint (``<prefix>.index`` + data shards), read without TensorFlow.

    Args:
        prefix: the checkpoint prefix, e.g. ``<model_dir>/model.ckpt-100``.

    Raises:
        CheckpointError: the index is missing, truncated, corrupt (checksums are verified) or
            not a TF V2 checkpoint index; the message names the file and the problem.

    Example:
        >>> reader = TFCheckpoint("/m/model.ckpt-5")  # doctest: +SKIP
        >>> reader.read("global_step")  # doctest: +SKIP
        array(5)
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.index_path = prefix + ".index"
        try:
            with open(self.index_path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise CheckpointError(f"Cannot read TF checkpoint index {self.index_path}: {exc}.") \
                from exc
        try:
            records = _read_table(data)
        except ValueError as exc:
            raise CheckpointError(f"TF checkpoint index {self.index_path} cannot be read: {exc}."
                                  ) from exc
        if not records or records[0][0] != _HEADER_KEY:
            raise CheckpointError(f"TF checkpoint index {self.index_path} has no bundle header "
                                  "(the entry under key ''): not a TF V2 checkpoint index.")
        header = self._parse("BundleHeaderProto", records[0][1], "the bundle header")
        version = header.version
        if version.min_consumer > 1 or 1 in version.bad_consumers:
            raise CheckpointError(
                f"TF checkpoint {self.index_path} needs a newer reader (bundle version producer "
                f"{version.producer}, min_consumer {version.min_consumer}).")
        if header.endianness not in (0, 1):
            raise CheckpointError(f"TF checkpoint {self.index_path} has an unknown endianness "
                                  f"{header.endianness}.")
        self.num_shards = int(header.num_shards)
        self._byte_order = "<" if header.endianness == 0 else ">"
        self._entries: dict[bytes, bytes] = dict(records[1:])
        self._full: dict[str, Any] = {}
        for key, value in records[1:]:
            if key[:1] == b"\x00":  # a slice of a partitioned variable (OrderedCode key)
                continue
            name = key.decode("utf-8", errors="surrogateescape")
            self._full[name] = self._parse("BundleEntryProto", value, f"the entry of {name!r}")

    def _parse(self, kind: str, value: bytes, what: str) -> Any:
        message = _proto(kind)()
        try:
            message.ParseFromString(value)
        except Exception as exc:
            raise CheckpointError(f"TF checkpoint index {self.index_path}: {what} is not a "
                                  f"valid {kind}: {exc}.") from exc
        return message

    def shapes(self) -> dict[str, list[int]]:
        """``{variable name: shape}`` of every variable, partitioned ones with their full shape."""
        return {name: [int(d.size) for d in entry.shape.dim] for name, entry in self._full.items()}

    def dtype_name(self, name: str) -> str:
        """TF's name of a variable's dtype (``'float32'``, ``'string'``, ``'bfloat16'``, ...)."""
        dtype = int(self._full[name].dtype)
        return _DTYPE_NAMES.get(dtype, f"DataType({dtype})")

    def __contains__(self, name: object) -> bool:
        return name in self._full

    def read(self, name: str) -> np.ndarray:
        """The full value of one variable (partitioned ones reassembled from their slices).

        Strings come back as an object array of ``bytes`` (as ``tf.train.load_variable``),
        bfloat16 as float32.

        Raises:
            KeyError: no such variable.
            CheckpointError: a data shard is missing, truncated or corrupt.
        """
        entry = self._full[name]
        shape = [int(d.size) for d in entry.shape.dim]
        if not entry.slices:
            return self._read_data(name, entry, shape)
        dtype = self._numpy_dtype(name, entry)
        full = np.zeros(shape, dtype=np.float32 if dtype == "bfloat16" else dtype)
        for tensor_slice in entry.slices:
            extents = [(int(e.start), int(e.length) if e.HasField("length") else -1)
                       for e in tensor_slice.extent]
            key = _slice_key(name.encode("utf-8", errors="surrogateescape"), extents)
            raw = self._entries.get(key)
            if raw is None:
                raise CheckpointError(f"TF checkpoint index {self.index_path} lacks slice "
                                      f"{extents} of partitioned variable {name!r}.")
            part = self._parse("BundleEntryProto", raw, f"a slice entry of {name!r}")
            index = tuple(slice(s, s + n) if n != -1 else slice(None) for s, n in extents)
            part_shape = [n if n != -1 else shape[d] for d, (_, n) in enumerate(extents)]
            full[index] = self._read_data(f"{name} (slice {extents})", part, part_shape)
        return full

    def _numpy_dtype(self, name: str, entry: Any) -> Any:
        dtype = _DTYPES.get(int(entry.dtype))
        if dtype is None:
            raise CheckpointError(f"Variable {name!r} of TF checkpoint {self.prefix} has dtype "
                                  f"{self.dtype_name(name)}, which has no numpy counterpart.")
        return dtype

    def _shard_path(self, shard: int) -> str:
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def _read_data(self, name: str, entry: Any, shape: list[int]) -> np.ndarray:
        dtype = self._numpy_dtype(name, entry)
        path = self._shard_path(int(entry.shard_id))
        offset, size = int(entry.offset), int(entry.size)
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(size)
        except OSError as exc:
            raise CheckpointError(f"Cannot read data shard {path} of TF checkpoint {self.prefix} "
                                  f"(variable {name!r}): {exc}.") from exc
        if len(data) != size:
            raise CheckpointError(
                f"Data shard {path} is truncated: variable {name!r} needs bytes {offset}.."
                f"{offset + size}, the file has {offset + len(data)}.")
        count = int(np.prod(shape)) if shape else 1
        if dtype is object:
            return self._strings(name, path, data, count, shape, int(entry.crc32c))
        if masked_crc32c(crc32c(data)) != int(entry.crc32c):
            raise CheckpointError(f"Checksum mismatch in data shard {path} for variable {name!r} "
                                  f"(bytes {offset}..{offset + size}): the file is corrupt.")
        if dtype == "bfloat16":
            raw = np.frombuffer(data, dtype=self._byte_order + "u2", count=count)
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(shape)
        array = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder(self._byte_order),
                              count=count)
        return array.astype(np.dtype(dtype)).reshape(shape)  # a native-order, writable copy

    def _strings(self, name: str, path: str, data: bytes, count: int, shape: list[int],
                 expected: int) -> np.ndarray:
        # [varint64 length] * count, masked crc32c of the lengths, then the bytes; the entry's
        # crc32c covers the lengths (each as uint32, uint64 past 4 GiB), that checksum and the
        # bytes (tensor_bundle.cc WriteStringTensor).
        lengths = []
        pos = 0
        try:
            for _ in range(count):
                length, pos = _varint(data, pos, f"the lengths of string variable {name!r}")
                lengths.append(length)
        except ValueError as exc:
            raise CheckpointError(f"Data shard {path}: {exc}: the file is corrupt.") from exc
        packed = b"".join(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n) for n in lengths)
        crc = crc32c(packed)
        if pos + 4 > len(data) or struct.unpack_from("<I", data, pos)[0] != masked_crc32c(crc):
            raise CheckpointError(f"Checksum mismatch in data shard {path} for the lengths of "
                                  f"string variable {name!r}: the file is corrupt.")
        crc = crc32c(data[pos:pos + 4], crc)
        pos += 4
        body = data[pos:]
        if len(body) != sum(lengths) or masked_crc32c(crc32c(body, crc)) != expected:
            raise CheckpointError(f"Checksum mismatch in data shard {path} for string variable "
                                  f"{name!r}: the file is corrupt.")
        values = np.empty(count, dtype=object)
        at = 0
        for i, length in enumerate(lengths):
            values[i] = bytes(body[at:at + length])
            at += length
        return values.reshape(shape)
