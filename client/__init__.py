"""graymq client library: producers, consumers and the gray allocation strategy."""

from graymq.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueGray,
    ConsumerView,
)
from graymq.client.consumer.pull_consumer import PullConsumer
from graymq.client.consumer.push_consumer import PushConsumer
from graymq.client.message import (
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    SendResult,
    SendStatus,
)
from graymq.client.producer import Producer
from graymq.client.selector import GrayQueueSelector

__all__ = [
    "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle", "AllocateMessageQueueGray",
    "ConsumerView", "ConsumeStatus", "GrayQueueSelector", "Message", "MessageExt", "MessageQueue", "Producer",
    "PullConsumer", "PullResult", "PushConsumer", "SendResult", "SendStatus",
]
