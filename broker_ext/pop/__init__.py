"""Pop consumption on graymq's store: what the RocketMQ 5 proxy serves stock simple consumers.

Per (group, topic, queue) the broker keeps the offset handed out next, the messages in flight (deadline,
attempt) and the acks above the group's committed offset; the committed offset (``offset_manager``) follows the
lowest message not acked, so lag, drain and ``gray status`` read it as for graymq's own consumers. One module
per concern: ``receipt`` (signed receipt handles), ``queue_state`` (one queue's in-flight table), ``ack_journal``
(acks made durable by a group-committed append-only file) and ``service`` (receive, ack, change invisible time,
dead-letter, on the broker's store).
"""
