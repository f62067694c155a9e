"""Consumer groups on the broker: their clients and the gray and normal subscription tables (``group_info``),
membership and pushes (``consumer_manager``), committed offsets, and queue leases (who may pull a queue)."""
