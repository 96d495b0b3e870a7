from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

BFLOAT16: DType
DESCRIPTOR: _descriptor.FileDescriptor
DTYPE_UNSPECIFIED: DType
FLOAT16: DType
FLOAT32: DType
FLOAT64: DType
INT32: DType
INT64: DType
UINT8: DType

class OutputPlacement(_message.Message):
    __slots__ = ["discard", "idle_expiry_ms", "keep", "keep_above_bytes", "shared_memory"]
    DISCARD_FIELD_NUMBER: _ClassVar[int]
    IDLE_EXPIRY_MS_FIELD_NUMBER: _ClassVar[int]
    KEEP_ABOVE_BYTES_FIELD_NUMBER: _ClassVar[int]
    KEEP_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    discard: bool
    idle_expiry_ms: int
    keep: bool
    keep_above_bytes: int
    shared_memory: SharedMemoryRef
    def __init__(self, keep: bool = ..., shared_memory: _Optional[_Union[SharedMemoryRef, _Mapping]] = ..., discard: bool = ..., keep_above_bytes: _Optional[int] = ..., idle_expiry_ms: _Optional[int] = ...) -> None: ...

class SharedMemoryRef(_message.Message):
    __slots__ = ["length", "offset", "region"]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    length: int
    offset: int
    region: str
    def __init__(self, region: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class Tensor(_message.Message):
    __slots__ = ["data", "dtype", "handle", "shape", "shared_memory"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    dtype: DType
    handle: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    shared_memory: SharedMemoryRef
    def __init__(self, dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ..., handle: _Optional[str] = ..., shared_memory: _Optional[_Union[SharedMemoryRef, _Mapping]] = ...) -> None: ...

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
