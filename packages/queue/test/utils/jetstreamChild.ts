/**
 * A JetStream consumer in a process of its own (`KilledConsumer.test.ts`), charging orders through
 * the inbox of `pgOrSqliteInbox.ts`.
 *
 * Arguments: the NATS URL, the stream, its durable pull consumer, the database, the records table,
 * the charges table, and where to stop (`pgOrSqliteInbox.POINTS`: it prints `PAUSED <point>` and
 * waits to be killed). With `finish` it consumes until the durable has a message acknowledged and
 * none pending an acknowledgement, then prints `DONE`.
 */
import * as JetStreamConsumer from "@effect-idempotency/queue/JetStreamConsumer"
import * as Children from "@effect-idempotency/test-support/Children"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { inbox, Order } from "./pgOrSqliteInbox.js"

const [url, stream, durable, database, records, charges, point] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string
]

const { consumer, layer } = inbox({ database, records, charges, point })

const program = Effect.gen(function*() {
  const nc = yield* Effect.acquireRelease(
    Effect.promise(() => connect({ servers: url })),
    (nc) => Effect.promise(() => nc.close())
  )
  const source = yield* Effect.promise(() => jetstream(nc).consumers.get(stream, durable))
  yield* JetStreamConsumer.consume(source, { payload: Order, consumer })
  const jsm = yield* Effect.promise(() => jetstreamManager(nc))
  // `finish`: until the message is acknowledged (bounded: the test's own timeout is longer)
  yield* Effect.promise(() => jsm.consumers.info(stream, durable)).pipe(
    Effect.filterOrFail(
      (info) => info.ack_floor.stream_seq > 0 && info.num_ack_pending === 0,
      () => new Error("not acknowledged yet")
    ),
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("60 seconds")))
  )
}).pipe(Effect.scoped, Effect.provide(layer), Effect.orDie)

Children.runMain(program)
