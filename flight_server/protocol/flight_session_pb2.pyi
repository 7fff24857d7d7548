from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SessionOptionValue(_message.Message):
    __slots__ = ("string_value", "bool_value", "int64_value", "double_value", "string_list_value")
    class StringListValue(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_LIST_VALUE_FIELD_NUMBER: _ClassVar[int]
    string_value: str
    bool_value: bool
    int64_value: int
    double_value: float
    string_list_value: SessionOptionValue.StringListValue
    def __init__(self, string_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., int64_value: _Optional[int] = ..., double_value: _Optional[float] = ..., string_list_value: _Optional[_Union[SessionOptionValue.StringListValue, _Mapping]] = ...) -> None: ...

class GetSessionOptionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSessionOptionsResult(_message.Message):
    __slots__ = ("session_options",)
    class SessionOptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SessionOptionValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SessionOptionValue, _Mapping]] = ...) -> None: ...
    SESSION_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    session_options: _containers.MessageMap[str, SessionOptionValue]
    def __init__(self, session_options: _Optional[_Mapping[str, SessionOptionValue]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CloseSessionResult(_message.Message):
    __slots__ = ("status",)
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNSPECIFIED: _ClassVar[CloseSessionResult.Status]
        CLOSED: _ClassVar[CloseSessionResult.Status]
        CLOSING: _ClassVar[CloseSessionResult.Status]
        NOT_CLOSEABLE: _ClassVar[CloseSessionResult.Status]
    UNSPECIFIED: CloseSessionResult.Status
    CLOSED: CloseSessionResult.Status
    CLOSING: CloseSessionResult.Status
    NOT_CLOSEABLE: CloseSessionResult.Status
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: CloseSessionResult.Status
    def __init__(self, status: _Optional[_Union[CloseSessionResult.Status, str]] = ...) -> None: ...
