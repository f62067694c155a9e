"""The release rules, pure and shared: which queues are gray (``queue_layout``), which side a send takes
(``gray_side``), which queues a consumer gets (``allocate``, ``group_gray``), which queue a send picks
(``selector``, ``route``), and a client's flag through drain-then-flip (``gray_state``, ``gray_flip``).

The client library and the broker (its gRPC endpoint for stock SDKs) both decide with these; nothing here does
I/O or imports either side.
"""
