/**
 * A taker of a Redis `PersistedQueue` in a process of its own (`PersistedQueueConsumer.test.ts`):
 * orders charged through a transactional operation on a SQLite file, so the charge (a row of
 * `charges`) and the element's record commit together. Except in `run`, the queue's locks last 2 s,
 * refreshed every 600 ms, the period of the store's reset pass too.
 *
 * Arguments: the Redis URL, the key prefix, the queue, the file, and what to do: `in-handler` (the
 * transaction open, nothing written), `after-write` (the charge written, not committed),
 * `before-complete` (committed, the take not completed): take one element, print `PAUSED <point>`
 * there and wait to be killed; `finish`: take until an element is acknowledged, then the copies the store hands out until
 * none comes for 2 s, each of which must replay, then print `DONE`;
 * `run`: take forever, four at a time, each element keyed by its order id, printing `RUNNING` first.
 */
import { IdempotentConsumer } from "@effect-idempotency/queue"
import * as PersistedQueueConsumer from "@effect-idempotency/queue/PersistedQueueConsumer"
import { SqlIdempotencyMigration, SqlTransactional } from "@effect-idempotency/sql"
import * as Children from "@effect-idempotency/test-support/Children"
import * as PersistedQueue from "@effect/experimental/PersistedQueue"
import * as RedisQueue from "@effect/experimental/PersistedQueue/Redis"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"

const [url, prefix, name, filename, mode] = process.argv.slice(2) as [string, string, string, string, string]

const Order = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })

const pauseAt = (here: string) => here === mode ? Effect.promise(() => Children.pause(here)) : Effect.void

const charge = SqlTransactional.make({
  name: "charge-order",
  payload: Order,
  success: Schema.Struct({ chargeId: Schema.String }),
  execute: ({ amountCents, orderId }) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* pauseAt("in-handler")
      const chargeId = `ch_${randomUUID()}`
      yield* sql`INSERT INTO charges (charge_id, order_id, amount_cents) VALUES (${chargeId}, ${orderId}, ${amountCents})`
      yield* pauseAt("after-write")
      return { chargeId }
    }).pipe(Effect.orDie),
  timeout: "5 seconds"
})

const byElement = IdempotentConsumer.fromOperation(charge, { retryDelay: "50 millis" })

// the pause after the handler: the outcome is committed, the queue has not completed the element
const consumer: typeof byElement = {
  ...byElement,
  handle: (delivery, payload) =>
    Effect.tap(
      byElement.handle(delivery, payload),
      (settlement) => settlement._tag === "Ack" ? pauseAt("before-complete") : Effect.void
    )
}

const byOrder = IdempotentConsumer.fromOperation(charge, {
  retryDelay: "50 millis",
  keyOf: (order) => order.orderId
})

const redisOptions = () => {
  const parsed = new URL(url)
  const db = parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : 0
  return { host: parsed.hostname, port: Number(parsed.port === "" ? 6379 : parsed.port), db }
}

const program = Effect.gen(function*() {
  yield* SqlIdempotencyMigration.migrate()
  const queue = yield* PersistedQueue.make({ name, schema: Order })
  if (mode === "run") {
    // a first take on the empty queue runs the store's reset pass before the test offers anything:
    // a pass while the other process holds elements would push malformed entries (README.md#persistedqueue)
    yield* queue.take(() => Effect.void).pipe(Effect.timeoutOption("300 millis"))
    yield* Effect.sync(() => fs.writeSync(1, "RUNNING\n"))
    return yield* PersistedQueueConsumer.run(queue, byOrder, { concurrency: 4, failurePause: "50 millis" })
  }
  // `finish`: until an element is acknowledged (bounded: the test's own timeout is longer)
  yield* PersistedQueueConsumer.take(queue, consumer).pipe(
    Effect.repeat({ until: (settlement) => settlement._tag === "Ack" }),
    Effect.timeout("60 seconds")
  )
  // then the copies the store hands out again (its reset pass requeues an element in hand), until
  // none comes for two seconds: each must replay the record
  yield* PersistedQueueConsumer.take(queue, consumer).pipe(
    Effect.timeoutOption("2 seconds"),
    Effect.flatMap(Option.match({
      onNone: () => Effect.succeed(true),
      onSome: (settlement) =>
        settlement._tag === "Ack" && settlement.replayed
          ? Effect.succeed(false)
          : Effect.dieMessage(`a copy was not replayed: ${JSON.stringify(settlement)}`)
    })),
    Effect.repeat({ until: (drained) => drained }),
    Effect.timeout("60 seconds")
  )
}).pipe(
  Effect.provide(
    Layer.mergeAll(
      SqliteClient.layer({ filename }),
      PersistedQueue.layer.pipe(Layer.provide(RedisQueue.layerStore({
        ...redisOptions(),
        prefix,
        pollInterval: "50 millis",
        // `run` takes four at a time: with the store's reset pass every 600 ms, a malformed entry it
        // pushes would lose the elements popped with it (README.md#persistedqueue)
        ...(mode === "run" ? {} : { lockExpiration: "2 seconds", lockRefreshInterval: "600 millis" })
      })))
    )
  ),
  Effect.orDie
)

Children.runMain(program)
