"""The broker's request processors, one per concern, and ``methods``: the one table of broker methods (processor
call, right, leader only) the TCP server, access control and the replica role read."""
