from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Method(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    METHOD_UNSPECIFIED: _ClassVar[Method]
    SEND_MESSAGE: _ClassVar[Method]
    SEND_BATCH: _ClassVar[Method]
    PULL_MESSAGE: _ClassVar[Method]
    HEARTBEAT: _ClassVar[Method]
    UNREGISTER_CLIENT: _ClassVar[Method]
    QUERY_CONSUMER_OFFSET: _ClassVar[Method]
    UPDATE_CONSUMER_OFFSET: _ClassVar[Method]
    GET_MIN_OFFSET: _ClassVar[Method]
    GET_MAX_OFFSET: _ClassVar[Method]
    GET_CONSUMER_LIST: _ClassVar[Method]
    CONSUMER_SEND_BACK: _ClassVar[Method]
    QUERY_MESSAGE_BY_KEY: _ClassVar[Method]
    VIEW_MESSAGE_BY_OFFSET: _ClassVar[Method]
    UPDATE_TOPIC: _ClassVar[Method]
    GET_TOPIC: _ClassVar[Method]
    SEARCH_OFFSET_BY_TIME: _ClassVar[Method]
    GET_GROUP_BACKLOG: _ClassVar[Method]
    AUTHENTICATE: _ClassVar[Method]
    LOCK_QUEUES: _ClassVar[Method]
    UNLOCK_QUEUES: _ClassVar[Method]
    REPLICA_FETCH: _ClassVar[Method]
    NOTIFY_GROUP_CHANGED: _ClassVar[Method]

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OK: _ClassVar[ErrorCode]
    SYSTEM_ERROR: _ClassVar[ErrorCode]
    SYSTEM_BUSY: _ClassVar[ErrorCode]
    UNKNOWN_METHOD: _ClassVar[ErrorCode]
    BAD_REQUEST: _ClassVar[ErrorCode]
    TOPIC_NOT_EXIST: _ClassVar[ErrorCode]
    QUEUE_NOT_EXIST: _ClassVar[ErrorCode]
    MESSAGE_TOO_LARGE: _ClassVar[ErrorCode]
    NO_PERMISSION: _ClassVar[ErrorCode]
    DISK_FULL: _ClassVar[ErrorCode]
    GRAY_ISOLATION_VIOLATION: _ClassVar[ErrorCode]
    SUBSCRIPTION_NOT_EXIST: _ClassVar[ErrorCode]
    CONSUMER_NOT_ONLINE: _ClassVar[ErrorCode]
    OFFSET_ILLEGAL: _ClassVar[ErrorCode]
    SERVICE_NOT_AVAILABLE: _ClassVar[ErrorCode]
    FLUSH_TIMEOUT: _ClassVar[ErrorCode]
    TIMEOUT: _ClassVar[ErrorCode]
    CONNECTION_CLOSED: _ClassVar[ErrorCode]
    PROTOCOL_ERROR: _ClassVar[ErrorCode]
    MESSAGE_NOT_FOUND: _ClassVar[ErrorCode]
    UNAUTHORIZED: _ClassVar[ErrorCode]
    FORBIDDEN: _ClassVar[ErrorCode]
    QUEUE_LOCKED: _ClassVar[ErrorCode]
    NOT_LEADER: _ClassVar[ErrorCode]
    REPLICATION_TIMEOUT: _ClassVar[ErrorCode]

class SendStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEND_OK: _ClassVar[SendStatus]
    FLUSH_DISK_TIMEOUT: _ClassVar[SendStatus]
    SERVICE_NOT_AVAILABLE_STATUS: _ClassVar[SendStatus]

class PullStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FOUND: _ClassVar[PullStatus]
    NO_NEW_MSG: _ClassVar[PullStatus]
    NO_MATCHED_MSG: _ClassVar[PullStatus]
    OFFSET_ILLEGAL_STATUS: _ClassVar[PullStatus]

class ConsumeModel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLUSTERING: _ClassVar[ConsumeModel]
    BROADCASTING: _ClassVar[ConsumeModel]

class ConsumeFromWhere(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSUME_FROM_LAST_OFFSET: _ClassVar[ConsumeFromWhere]
    CONSUME_FROM_FIRST_OFFSET: _ClassVar[ConsumeFromWhere]
    CONSUME_FROM_TIMESTAMP: _ClassVar[ConsumeFromWhere]

class TopicPerm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PERM_UNSPECIFIED: _ClassVar[TopicPerm]
    PERM_READ: _ClassVar[TopicPerm]
    PERM_WRITE: _ClassVar[TopicPerm]
    PERM_READ_WRITE: _ClassVar[TopicPerm]
METHOD_UNSPECIFIED: Method
SEND_MESSAGE: Method
SEND_BATCH: Method
PULL_MESSAGE: Method
HEARTBEAT: Method
UNREGISTER_CLIENT: Method
QUERY_CONSUMER_OFFSET: Method
UPDATE_CONSUMER_OFFSET: Method
GET_MIN_OFFSET: Method
GET_MAX_OFFSET: Method
GET_CONSUMER_LIST: Method
CONSUMER_SEND_BACK: Method
QUERY_MESSAGE_BY_KEY: Method
VIEW_MESSAGE_BY_OFFSET: Method
UPDATE_TOPIC: Method
GET_TOPIC: Method
SEARCH_OFFSET_BY_TIME: Method
GET_GROUP_BACKLOG: Method
AUTHENTICATE: Method
LOCK_QUEUES: Method
UNLOCK_QUEUES: Method
REPLICA_FETCH: Method
NOTIFY_GROUP_CHANGED: Method
OK: ErrorCode
SYSTEM_ERROR: ErrorCode
SYSTEM_BUSY: ErrorCode
UNKNOWN_METHOD: ErrorCode
BAD_REQUEST: ErrorCode
TOPIC_NOT_EXIST: ErrorCode
QUEUE_NOT_EXIST: ErrorCode
MESSAGE_TOO_LARGE: ErrorCode
NO_PERMISSION: ErrorCode
DISK_FULL: ErrorCode
GRAY_ISOLATION_VIOLATION: ErrorCode
SUBSCRIPTION_NOT_EXIST: ErrorCode
CONSUMER_NOT_ONLINE: ErrorCode
OFFSET_ILLEGAL: ErrorCode
SERVICE_NOT_AVAILABLE: ErrorCode
FLUSH_TIMEOUT: ErrorCode
TIMEOUT: ErrorCode
CONNECTION_CLOSED: ErrorCode
PROTOCOL_ERROR: ErrorCode
MESSAGE_NOT_FOUND: ErrorCode
UNAUTHORIZED: ErrorCode
FORBIDDEN: ErrorCode
QUEUE_LOCKED: ErrorCode
NOT_LEADER: ErrorCode
REPLICATION_TIMEOUT: ErrorCode
SEND_OK: SendStatus
FLUSH_DISK_TIMEOUT: SendStatus
SERVICE_NOT_AVAILABLE_STATUS: SendStatus
FOUND: PullStatus
NO_NEW_MSG: PullStatus
NO_MATCHED_MSG: PullStatus
OFFSET_ILLEGAL_STATUS: PullStatus
CLUSTERING: ConsumeModel
BROADCASTING: ConsumeModel
CONSUME_FROM_LAST_OFFSET: ConsumeFromWhere
CONSUME_FROM_FIRST_OFFSET: ConsumeFromWhere
CONSUME_FROM_TIMESTAMP: ConsumeFromWhere
PERM_UNSPECIFIED: TopicPerm
PERM_READ: TopicPerm
PERM_WRITE: TopicPerm
PERM_READ_WRITE: TopicPerm

class Envelope(_message.Message):
    __slots__ = ("method", "is_response", "oneway", "code", "error_message", "body")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    IS_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ONEWAY_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    method: Method
    is_response: bool
    oneway: bool
    code: ErrorCode
    error_message: str
    body: bytes
    def __init__(self, method: _Optional[_Union[Method, str]] = ..., is_response: _Optional[bool] = ..., oneway: _Optional[bool] = ..., code: _Optional[_Union[ErrorCode, str]] = ..., error_message: _Optional[str] = ..., body: _Optional[bytes] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Message(_message.Message):
    __slots__ = ("topic", "body", "tags", "keys", "properties", "gray", "trace_id", "msg_id", "born_timestamp", "born_host")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    GRAY_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    topic: str
    body: bytes
    tags: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    properties: _containers.ScalarMap[str, str]
    gray: bool
    trace_id: str
    msg_id: str
    born_timestamp: int
    born_host: str
    def __init__(self, topic: _Optional[str] = ..., body: _Optional[bytes] = ..., tags: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., properties: _Optional[_Mapping[str, str]] = ..., gray: _Optional[bool] = ..., trace_id: _Optional[str] = ..., msg_id: _Optional[str] = ..., born_timestamp: _Optional[int] = ..., born_host: _Optional[str] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("producer_group", "message", "queue_id", "reconsume_times", "producer_id", "sequence")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    message: Message
    queue_id: int
    reconsume_times: int
    producer_id: int
    sequence: int
    def __init__(self, producer_group: _Optional[str] = ..., message: _Optional[_Union[Message, _Mapping]] = ..., queue_id: _Optional[int] = ..., reconsume_times: _Optional[int] = ..., producer_id: _Optional[int] = ..., sequence: _Optional[int] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ("status", "msg_id", "broker_name", "queue_id", "queue_offset", "commit_log_offset", "duplicate")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    status: SendStatus
    msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    duplicate: bool
    def __init__(self, status: _Optional[_Union[SendStatus, str]] = ..., msg_id: _Optional[str] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., commit_log_offset: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class SendBatchRequest(_message.Message):
    __slots__ = ("producer_group", "topic", "queue_id", "messages", "producer_id", "sequence")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    topic: str
    queue_id: int
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    producer_id: int
    sequence: int
    def __init__(self, producer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., producer_id: _Optional[int] = ..., sequence: _Optional[int] = ...) -> None: ...

class SendBatchResponse(_message.Message):
    __slots__ = ("status", "msg_ids", "broker_name", "queue_id", "first_queue_offset", "duplicate")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MSG_IDS_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    status: SendStatus
    msg_ids: _containers.RepeatedScalarFieldContainer[str]
    broker_name: str
    queue_id: int
    first_queue_offset: int
    duplicate: bool
    def __init__(self, status: _Optional[_Union[SendStatus, str]] = ..., msg_ids: _Optional[_Iterable[str]] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ..., first_queue_offset: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "topic", "queue_id", "queue_offset", "max_msg_nums", "suspend_timeout_ms", "gray_flag", "adopted", "commit_offset", "sub_expression", "lane")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MSG_NUMS_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    GRAY_FLAG_FIELD_NUMBER: _ClassVar[int]
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SUB_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    suspend_timeout_ms: int
    gray_flag: bool
    adopted: bool
    commit_offset: int
    sub_expression: str
    lane: str
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., max_msg_nums: _Optional[int] = ..., suspend_timeout_ms: _Optional[int] = ..., gray_flag: _Optional[bool] = ..., adopted: _Optional[bool] = ..., commit_offset: _Optional[int] = ..., sub_expression: _Optional[str] = ..., lane: _Optional[str] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("status", "next_begin_offset", "min_offset", "max_offset", "records", "record_count")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_BEGIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: bytes
    record_count: int
    def __init__(self, status: _Optional[_Union[PullStatus, str]] = ..., next_begin_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., records: _Optional[bytes] = ..., record_count: _Optional[int] = ...) -> None: ...

class SubscriptionData(_message.Message):
    __slots__ = ("topic", "sub_string", "sub_version")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUB_STRING_FIELD_NUMBER: _ClassVar[int]
    SUB_VERSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    sub_string: str
    sub_version: int
    def __init__(self, topic: _Optional[str] = ..., sub_string: _Optional[str] = ..., sub_version: _Optional[int] = ...) -> None: ...

class ConsumerData(_message.Message):
    __slots__ = ("group", "consume_model", "consume_from_where", "subscriptions", "gray_flag", "gray_switch", "gray_weight", "lane", "lane_weights", "client_id")
    class LaneWeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CONSUME_MODEL_FIELD_NUMBER: _ClassVar[int]
    CONSUME_FROM_WHERE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    GRAY_FLAG_FIELD_NUMBER: _ClassVar[int]
    GRAY_SWITCH_FIELD_NUMBER: _ClassVar[int]
    GRAY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    LANE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group: str
    consume_model: ConsumeModel
    consume_from_where: ConsumeFromWhere
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionData]
    gray_flag: bool
    gray_switch: bool
    gray_weight: int
    lane: str
    lane_weights: _containers.ScalarMap[str, int]
    client_id: str
    def __init__(self, group: _Optional[str] = ..., consume_model: _Optional[_Union[ConsumeModel, str]] = ..., consume_from_where: _Optional[_Union[ConsumeFromWhere, str]] = ..., subscriptions: _Optional[_Iterable[_Union[SubscriptionData, _Mapping]]] = ..., gray_flag: _Optional[bool] = ..., gray_switch: _Optional[bool] = ..., gray_weight: _Optional[int] = ..., lane: _Optional[str] = ..., lane_weights: _Optional[_Mapping[str, int]] = ..., client_id: _Optional[str] = ...) -> None: ...

class ProducerData(_message.Message):
    __slots__ = ("group", "gray_flag", "lane")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    GRAY_FLAG_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    group: str
    gray_flag: bool
    lane: str
    def __init__(self, group: _Optional[str] = ..., gray_flag: _Optional[bool] = ..., lane: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("client_id", "consumers", "producers")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    PRODUCERS_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    consumers: _containers.RepeatedCompositeFieldContainer[ConsumerData]
    producers: _containers.RepeatedCompositeFieldContainer[ProducerData]
    def __init__(self, client_id: _Optional[str] = ..., consumers: _Optional[_Iterable[_Union[ConsumerData, _Mapping]]] = ..., producers: _Optional[_Iterable[_Union[ProducerData, _Mapping]]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("broker_time_ms", "client_expiry_ms", "queue_lease_ms")
    BROKER_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_EXPIRY_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    broker_time_ms: int
    client_expiry_ms: int
    queue_lease_ms: int
    def __init__(self, broker_time_ms: _Optional[int] = ..., client_expiry_ms: _Optional[int] = ..., queue_lease_ms: _Optional[int] = ...) -> None: ...

class UnregisterRequest(_message.Message):
    __slots__ = ("client_id", "consumer_group", "producer_group")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    consumer_group: str
    producer_group: str
    def __init__(self, client_id: _Optional[str] = ..., consumer_group: _Optional[str] = ..., producer_group: _Optional[str] = ...) -> None: ...

class QueueRef(_message.Message):
    __slots__ = ("topic", "queue_id", "offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class QueueOwner(_message.Message):
    __slots__ = ("topic", "queue_id", "client_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    client_id: str
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., client_id: _Optional[str] = ...) -> None: ...

class LockQueuesRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "queues")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueRef]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ...) -> None: ...

class LockQueuesResponse(_message.Message):
    __slots__ = ("locked", "held")
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    locked: _containers.RepeatedCompositeFieldContainer[QueueRef]
    held: _containers.RepeatedCompositeFieldContainer[QueueOwner]
    def __init__(self, locked: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ..., held: _Optional[_Iterable[_Union[QueueOwner, _Mapping]]] = ...) -> None: ...

class UnlockQueuesRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "queues")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueRef]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ...) -> None: ...

class QueryConsumerOffsetRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class QueryConsumerOffsetResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class UpdateConsumerOffsetRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id", "offset", "client_id")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    offset: int
    client_id: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., client_id: _Optional[str] = ...) -> None: ...

class QueueRequest(_message.Message):
    __slots__ = ("topic", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class SearchOffsetRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class OffsetResponse(_message.Message):
    __slots__ = ("offset",)
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class ConsumerListRequest(_message.Message):
    __slots__ = ("consumer_group",)
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    def __init__(self, consumer_group: _Optional[str] = ...) -> None: ...

class ClientInfo(_message.Message):
    __slots__ = ("client_id", "gray_flag", "last_heartbeat_ms", "topics", "lane")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    GRAY_FLAG_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    gray_flag: bool
    last_heartbeat_ms: int
    topics: _containers.RepeatedScalarFieldContainer[str]
    lane: str
    def __init__(self, client_id: _Optional[str] = ..., gray_flag: _Optional[bool] = ..., last_heartbeat_ms: _Optional[int] = ..., topics: _Optional[_Iterable[str]] = ..., lane: _Optional[str] = ...) -> None: ...

class ConsumerListResponse(_message.Message):
    __slots__ = ("clients", "subscriptions", "gray_subscriptions", "gray_switch", "lane_subscriptions")
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    GRAY_SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    GRAY_SWITCH_FIELD_NUMBER: _ClassVar[int]
    LANE_SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    clients: _containers.RepeatedCompositeFieldContainer[ClientInfo]
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionData]
    gray_subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionData]
    gray_switch: bool
    lane_subscriptions: _containers.RepeatedCompositeFieldContainer[LaneSubscriptions]
    def __init__(self, clients: _Optional[_Iterable[_Union[ClientInfo, _Mapping]]] = ..., subscriptions: _Optional[_Iterable[_Union[SubscriptionData, _Mapping]]] = ..., gray_subscriptions: _Optional[_Iterable[_Union[SubscriptionData, _Mapping]]] = ..., gray_switch: _Optional[bool] = ..., lane_subscriptions: _Optional[_Iterable[_Union[LaneSubscriptions, _Mapping]]] = ...) -> None: ...

class LaneSubscriptions(_message.Message):
    __slots__ = ("lane", "subscriptions")
    LANE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    lane: str
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionData]
    def __init__(self, lane: _Optional[str] = ..., subscriptions: _Optional[_Iterable[_Union[SubscriptionData, _Mapping]]] = ...) -> None: ...

class SendBackRequest(_message.Message):
    __slots__ = ("consumer_group", "commit_log_offset", "delay_level", "max_reconsume_times", "gray_flag", "origin_topic", "lane")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELAY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    GRAY_FLAG_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_TOPIC_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    commit_log_offset: int
    delay_level: int
    max_reconsume_times: int
    gray_flag: bool
    origin_topic: str
    lane: str
    def __init__(self, consumer_group: _Optional[str] = ..., commit_log_offset: _Optional[int] = ..., delay_level: _Optional[int] = ..., max_reconsume_times: _Optional[int] = ..., gray_flag: _Optional[bool] = ..., origin_topic: _Optional[str] = ..., lane: _Optional[str] = ...) -> None: ...

class QueryByKeyRequest(_message.Message):
    __slots__ = ("topic", "key", "max_num", "begin_timestamp_ms", "end_timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    max_num: int
    begin_timestamp_ms: int
    end_timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., max_num: _Optional[int] = ..., begin_timestamp_ms: _Optional[int] = ..., end_timestamp_ms: _Optional[int] = ...) -> None: ...

class ViewByOffsetRequest(_message.Message):
    __slots__ = ("commit_log_offset",)
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    commit_log_offset: int
    def __init__(self, commit_log_offset: _Optional[int] = ...) -> None: ...

class MessagesResponse(_message.Message):
    __slots__ = ("records", "record_count")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    records: bytes
    record_count: int
    def __init__(self, records: _Optional[bytes] = ..., record_count: _Optional[int] = ...) -> None: ...

class TopicConfig(_message.Message):
    __slots__ = ("topic", "queue_nums", "gray_queue_nums", "perm", "order", "lane_slots", "lanes")
    class LanesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    GRAY_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    LANE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    LANES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_nums: int
    gray_queue_nums: int
    perm: TopicPerm
    order: bool
    lane_slots: int
    lanes: _containers.ScalarMap[str, int]
    def __init__(self, topic: _Optional[str] = ..., queue_nums: _Optional[int] = ..., gray_queue_nums: _Optional[int] = ..., perm: _Optional[_Union[TopicPerm, str]] = ..., order: _Optional[bool] = ..., lane_slots: _Optional[int] = ..., lanes: _Optional[_Mapping[str, int]] = ...) -> None: ...

class UpdateTopicRequest(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: TopicConfig
    def __init__(self, config: _Optional[_Union[TopicConfig, _Mapping]] = ...) -> None: ...

class GetTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class GroupBacklogRequest(_message.Message):
    __slots__ = ("consumer_group", "topic")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class QueueBacklog(_message.Message):
    __slots__ = ("topic", "queue_id", "gray", "consumer_offset", "max_offset", "min_offset", "lane")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    GRAY_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    gray: bool
    consumer_offset: int
    max_offset: int
    min_offset: int
    lane: str
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., gray: _Optional[bool] = ..., consumer_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., lane: _Optional[str] = ...) -> None: ...

class GroupBacklogResponse(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueBacklog]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueBacklog, _Mapping]]] = ...) -> None: ...

class GroupChangedNotice(_message.Message):
    __slots__ = ("consumer_group", "reason")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    reason: str
    def __init__(self, consumer_group: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AuthenticateRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class AuthenticateResponse(_message.Message):
    __slots__ = ("principal",)
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    principal: str
    def __init__(self, principal: _Optional[str] = ...) -> None: ...

class ReplicaFetchRequest(_message.Message):
    __slots__ = ("broker_name", "replica_id", "epoch", "offset", "max_bytes", "wait_ms", "state_version")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    replica_id: int
    epoch: int
    offset: int
    max_bytes: int
    wait_ms: int
    state_version: int
    def __init__(self, broker_name: _Optional[str] = ..., replica_id: _Optional[int] = ..., epoch: _Optional[int] = ..., offset: _Optional[int] = ..., max_bytes: _Optional[int] = ..., wait_ms: _Optional[int] = ..., state_version: _Optional[int] = ...) -> None: ...

class ReplicaFetchResponse(_message.Message):
    __slots__ = ("epoch", "data", "next_offset", "leader_end", "segment_size", "state_version", "state")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_END_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_SIZE_FIELD_NUMBER: _ClassVar[int]
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    data: bytes
    next_offset: int
    leader_end: int
    segment_size: int
    state_version: int
    state: bytes
    def __init__(self, epoch: _Optional[int] = ..., data: _Optional[bytes] = ..., next_offset: _Optional[int] = ..., leader_end: _Optional[int] = ..., segment_size: _Optional[int] = ..., state_version: _Optional[int] = ..., state: _Optional[bytes] = ...) -> None: ...
