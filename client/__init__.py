"""graymq client library: producers, consumers and the gray allocation strategy."""

from client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueGray,
    ConsumerView,
)
from client.consumer.pull_consumer import PullConsumer
from client.consumer.push_consumer import PushConsumer
from client.message import (
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    SendResult,
    SendStatus,
)
from client.producer import Producer
from client.selector import GrayQueueSelector

__all__ = [
    "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle", "AllocateMessageQueueGray",
    "ConsumerView", "ConsumeStatus", "GrayQueueSelector", "Message", "MessageExt", "MessageQueue", "Producer",
    "PullConsumer", "PullResult", "PushConsumer", "SendResult", "SendStatus",
]
