"""The columns the ``graymq`` sink reads, checked against the frame's schema on the driver, and rows to messages.

``body`` (binary or string) is required; ``topic`` (string; required unless the ``topic`` option is
given), ``tag`` (string; ``tags``, the source's name for it, is accepted too), ``keys``
(array<string>), ``properties`` (map<string,string>) and ``sharding_key`` (string: same key, same
queue) are optional. Other columns are ignored, so a frame read from graymq can be written as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import ArrayType, BinaryType, DataType, MapType, StringType, StructType

from graymq.client.message import Message
from graymq.protocol.errors import ConfigError

_STRING = StringType()
_OPTIONAL: dict[str, tuple[DataType, str]] = {
    "topic": (_STRING, "string"),
    "tag": (_STRING, "string"),
    "tags": (_STRING, "string"),
    "keys": (ArrayType(_STRING), "array<string>"),
    "properties": (MapType(_STRING, _STRING), "map<string,string>"),
    "sharding_key": (_STRING, "string"),
}


def _same_type(actual: DataType, expected: DataType) -> bool:
    """Equal up to nullability of the elements and values (Spark marks them as it likes)."""
    if isinstance(expected, ArrayType):
        return isinstance(actual, ArrayType) and actual.elementType == expected.elementType
    if isinstance(expected, MapType):
        return (isinstance(actual, MapType) and actual.keyType == expected.keyType
                and actual.valueType == expected.valueType)
    return actual == expected


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Where each column the sink reads sits in a row (``None``: absent)."""

    body: int
    topic: int | None
    tag: int | None
    keys: int | None
    properties: int | None
    sharding_key: int | None

    @classmethod
    def check(cls, schema: StructType, topic_option: str | None) -> SinkColumns:
        """The positions of the sink's columns; a ``ConfigError`` naming the first missing or mistyped one."""
        fields = {f.name: (i, f.dataType) for i, f in enumerate(schema.fields)}
        if "body" not in fields:
            raise ConfigError(f"graymq sink: column body (binary or string) is missing in {schema.simpleString()}")
        body_type = fields["body"][1]
        if not isinstance(body_type, BinaryType | StringType):
            raise ConfigError(f"graymq sink: column body must be binary or string, not {body_type.simpleString()}")
        for name, (expected, shown) in _OPTIONAL.items():
            if name in fields and not _same_type(fields[name][1], expected):
                raise ConfigError(f"graymq sink: column {name} must be {shown}, not {fields[name][1].simpleString()}")
        if "topic" not in fields and topic_option is None:
            raise ConfigError("graymq sink: no topic: give the option topic or a column topic (string)")
        if "tag" in fields and "tags" in fields:
            raise ConfigError("graymq sink: columns tag and tags both given; keep one")

        def at(name: str) -> int | None:
            return fields[name][0] if name in fields else None

        return cls(fields["body"][0], at("topic"), at("tag") if "tag" in fields else at("tags"), at("keys"),
                   at("properties"), at("sharding_key"))

    def message(self, row: Any, default_topic: str | None) -> Message:
        """The message of one row (a tuple in schema order); a null body or topic is a ``ConfigError``."""
        body = row[self.body]
        if body is None:
            raise ConfigError("graymq sink: a row has a null body")
        topic = (row[self.topic] if self.topic is not None else None) or default_topic
        if not topic:
            raise ConfigError("graymq sink: a row has a null topic and no topic option is given")
        return Message(
            topic, body.encode() if isinstance(body, str) else bytes(body),
            tags=(row[self.tag] or "") if self.tag is not None else "",
            keys=list(row[self.keys] or ()) if self.keys is not None else [],
            properties=dict(row[self.properties] or {}) if self.properties is not None else {},
            sharding_key=row[self.sharding_key] if self.sharding_key is not None else None,
        )
