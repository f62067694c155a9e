"""Pop consumption on graymq's store: what the RocketMQ 5 proxy serves stock simple consumers.

Per (group, topic, queue) the broker keeps the offset handed out next, the messages in flight (deadline,
attempt) and the acks above the group's committed offset; the committed offset (``offset_manager``) follows the
lowest message not acked, so lag, drain and ``gray status`` read it as for graymq's own consumers. One module
per concern: ``receipt`` (signed receipt handles), ``queue_state`` (one queue's in-flight table), ``ack_journal``
(acks in an append-only file) and ``service`` (receive, ack, change invisible time, dead-letter, on the store).

Acks are as durable as the broker's messages, by its ``flush`` setting: sync, an ack is fsynced (group-committed)
before it is answered; async, it is written to the journal file before it is answered (it survives kill -9 of
the broker, not a power cut) and fsynced every ``flush_interval_ms``.
"""
