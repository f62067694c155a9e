"""``ConsumerSide``: the side a consumer is on, read from its flip and its group's gray settings — the same for
graymq's push consumers (``client.consumer.runtime``) and the stock consumers the broker's gRPC endpoint serves."""

from __future__ import annotations

from graymq.core.gray_flip import GrayFlip
from graymq.core.group_gray import GroupGray


class ConsumerSide:
    """A mixin for a consumer's state holding ``flip`` and ``group_gray``."""

    __slots__ = ()
    flip: GrayFlip
    group_gray: GroupGray

    @property
    def gray(self) -> bool:
        """The effective flag (a draining consumer is still gray)."""
        return self.flip.gray_state.gray

    @property
    def lane(self) -> str | None:
        """The lane the consumer is in (a draining consumer still is); None for base."""
        return self.flip.in_lane

    @property
    def retired(self) -> bool:
        """A gray consumer of a group whose gray side was rolled back: it holds and consumes nothing."""
        return self.gray and self.group_gray.retired
