// Drive the stock RocketMQ 5 Node.js SDK (rocketmq-client-nodejs) in a process of its own, for graymq's tests.
//
// Argument: a JSON spec {"endpoint", "ak", "sk", "tls", "topic", "mode", ...}.
//   mode "send": "messages", each {"body", "tag", "keys", "properties", "group"}; prints {"client_id"} once
//     started, then per message {"message_id", "offset"} or {"error"}.
//   mode "receive": "group", "expect", "wait_s", "invisible_s", "ack"; prints {"client_id"}, then per message
//     received {"message_id", "body", "tag", "keys", "properties", "group", "attempt", "corrupted"} (the fields of
//     the Python SDK's driver, stock_sdk_consumer_driver.py), acked unless "ack" is false, until "expect" messages
//     or "wait_s" seconds.
// A client that cannot start prints {"startup_error"} and exits 1.
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

function print(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

// An error with its causes: the SDK wraps the broker's refusal (code and message) in its startup error.
function reason(error) {
  const parts = [];
  for (let e = error; e; e = e.cause) parts.push(e && e.message ? e.message : String(e));
  return parts.join(': ');
}

function options(spec) {
  const credentials = spec.ak ? { accessKey: spec.ak, accessSecret: spec.sk } : undefined;
  return { endpoints: spec.endpoint, namespace: '', sessionCredentials: credentials, sslEnabled: Boolean(spec.tls),
    requestTimeout: 5000 };
}

function asMessage(topic, item) {
  return { topic, body: Buffer.from(item.body), tag: item.tag, keys: item.keys, messageGroup: item.group,
    properties: item.properties ? new Map(Object.entries(item.properties)) : undefined };
}

async function send(spec) {
  const producer = new Producer({ ...options(spec), topic: spec.topic });
  await producer.startup();
  print({ client_id: producer.clientId });
  try {
    for (const item of spec.messages) {
      try {
        const receipt = await producer.send(asMessage(spec.topic, item));
        print({ message_id: receipt.messageId, offset: Number(receipt.offset) });
      } catch (error) {
        print({ error: reason(error) });
      }
    }
  } finally {
    await producer.shutdown();
  }
}

function asLine(view) {
  return { message_id: view.messageId, body: view.body.toString(), tag: view.tag || null, keys: view.keys,
    properties: Object.fromEntries(view.properties), group: view.messageGroup || null, attempt: view.deliveryAttempt,
    corrupted: Boolean(view.corrupted) };
}

async function receive(spec) {
  const consumer = new SimpleConsumer({ ...options(spec), consumerGroup: spec.group, awaitDuration: 2000,
    subscriptions: new Map([[spec.topic, spec.tag || '*']]) });
  await consumer.startup();
  print({ client_id: consumer.clientId });
  const deadline = Date.now() + (spec.wait_s || 30) * 1000;
  let received = 0;
  try {
    while (received < (spec.expect || 1) && Date.now() < deadline) {
      for (const view of await consumer.receive(16, (spec.invisible_s || 15) * 1000)) {
        if (spec.ack !== false) await consumer.ack(view);
        print(asLine(view));
        received += 1;
      }
    }
  } finally {
    await consumer.shutdown();
  }
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  try {
    await (spec.mode === 'receive' ? receive(spec) : send(spec));
  } catch (error) {
    print({ startup_error: reason(error) });
    process.exitCode = 1;
  }
  process.exit();  // a client that failed to start leaves its timers running (stdout to a pipe is written already)
}

main();
