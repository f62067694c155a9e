"""RocketMQ 5's gRPC protocol (``apache.rocketmq.v2.MessagingService``) on the broker, for the stock RocketMQ 5 SDKs.

``graymq broker --grpc-port PORT`` serves it next to the broker port, on the broker's event loop. One module per
concern: ``server`` (the grpc.aio server and the table of RPCs), ``credentials`` (RocketMQ's signature, mapped to
graymq principals), ``route`` (QueryRoute), ``clients`` and ``settings`` (Heartbeat, Telemetry,
NotifyClientTermination), ``registrations`` (a stock client's place in the name server, held by its streams),
``producer_sides`` and ``consumer_sides`` (the gray split of a stock client's sends and receives, decided here from
the name server's flag for its client id), ``assignment`` (QueryAssignment), ``send`` (SendMessage through the
broker's put-message path), ``receive`` and ``ack`` (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue on the broker's pop state, ``broker_ext.pop``), ``renewals`` (a PushConsumer's
deliveries kept invisible while it is connected), ``status`` (RocketMQ's status codes) and ``budgets`` (what a
principal and a connection may hold); ``wiring`` builds it from a broker. Every other RPC (transactions,
PullMessage, ...) answers ``NOT_IMPLEMENTED`` at once.

A stock client needs only the endpoint and, outside dev mode, an access key and secret (``graymq principal add
NAME --access-key``; a principal's token as both works too). Python SDK::

    config = ClientConfiguration("broker-host:8081", Credentials(access_key, secret_key))
    producer = Producer(config, ("ORDER_PAID",))  # tls_enable=True when the broker has --tls-cert
"""
