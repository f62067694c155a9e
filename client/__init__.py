"""graymq client library: producers, consumers and the gray allocation strategy."""

from graymq.client.blocking_producer import BlockingProducer
from graymq.client.config import ClientConfig
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
from graymq.client.producer_settings import ProducerSettings
from graymq.core.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueGray,
    ConsumerView,
)
from graymq.core.selector import GrayQueueSelector

__all__ = [
    "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle", "AllocateMessageQueueGray",
    "BlockingProducer", "ClientConfig", "ConsumerView", "ConsumeStatus", "GrayQueueSelector", "Message", "MessageExt",
    "MessageQueue", "Producer", "ProducerSettings", "PullConsumer", "PullResult", "PushConsumer", "SendResult",
    "SendStatus",
]
