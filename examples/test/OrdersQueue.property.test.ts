/**
 * The retry property of the order consumer as the example deploys it (`Orders.consumer`: the
 * transactional `placeOrder` and its settlement options), on PostgreSQL (the server of `TEST_PG_URL`,
 * else PGlite).
 *
 * `RetryProperty.check` itself does not judge a transactional operation (packages/testing/README.md,
 * "Not for the transactional modes"): its simulated downstream lives outside the database and never
 * rolls back, and its store spy sees no record, since the record is written by the transaction. So
 * the scenarios are RetryProperty's own (`RetryProperty.arbitrary`: a message's deliveries, the
 * producer's duplicates, the broker's redeliveries after a failure, what the payments call does,
 * and where the consumer crashes), played against the consumer itself, and the property is counted
 * in the database: whatever happened, a last healthy delivery is acknowledged, the order has one row
 * and one charge, and exactly one delivery committed it.
 */
import type { IdempotentConsumer } from "@effect-idempotency/queue"
import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
import { Postgres } from "@effect-idempotency/test-support"
import type { FaultyStore, PlatformModel, SimulatedDownstream } from "@effect-idempotency/testing"
import { RetryProperty } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import { SqlError } from "@effect/sql/SqlError"
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { randomUUID } from "node:crypto"
import * as Orders from "../src/orders-queue/Orders.js"

const Database = Layer.unwrapScoped(Effect.gen(function*() {
  const database = yield* Postgres.primary({ maxConnections: 30 })
  const client = PgClient.layer({ url: Redacted.make(database.url), maxConnections: 12 })
  const ready = Layer.effectDiscard(Effect.zipRight(PgIdempotencyMigration.migration(), Orders.createTables))
  return Layer.merge(Orders.PaymentsLive, ready).pipe(Layer.provideMerge(client))
}))

/**
 * A message on a broker: delivered again a second after a failed delivery (the consumer's
 * `retryDelay`), three times, below `maxDeliveries`; published twice more by a producer that retried.
 */
const broker: PlatformModel.Platform = {
  name: "a queue consumer (redelivered after a failure, duplicates from the producer)",
  timeLimit: "10 seconds",
  retryDelays: ["1 second", "1 second", "1 second"],
  duplicates: { max: 2, within: "1 minute" }
}

// the payments call succeeds, fails or dies, before or after its charge; the consumer crashes at any point
const scenarios = RetryProperty.arbitrary({
  platform: broker,
  downstream: { kinds: ["Succeed", "Fail", "ApplyThenFail", "Die", "ApplyThenDie"], maxLatency: "20 millis" },
  faults: { methods: [], maxLatency: "0 millis" }
})

type Payments = typeof Orders.Payments.Service

/**
 * The payments service of one attempt: the live one, called as `behaviour` says, and interrupted at
 * `crash` (an in-process stand-in for the process dying; the SIGKILL itself is OrdersQueue.test.ts's).
 */
const scripted = (
  live: Payments,
  behaviour: SimulatedDownstream.Behaviour | undefined,
  crash: FaultyStore.CrashPoint | undefined
): Payments => ({
  charge: (order) =>
    Effect.gen(function*() {
      if (crash === "afterReserve") return yield* Effect.interrupt
      const latency = behaviour !== undefined && "latencyMs" in behaviour ? behaviour.latencyMs : 0
      if (latency > 0) yield* Effect.sleep(latency)
      if (behaviour?._tag === "Fail") return yield* new SqlError({ message: `payments: ${behaviour.code}` })
      if (behaviour?._tag === "Die") return yield* Effect.die("payments: died")
      const receipt = yield* live.charge(order)
      if (crash === "afterDownstream" || crash === "beforeComplete") return yield* Effect.interrupt
      if (behaviour?._tag === "ApplyThenFail") return yield* new SqlError({ message: `payments: ${behaviour.code}` })
      if (behaviour?._tag === "ApplyThenDie") return yield* Effect.die("payments: died after the charge")
      return receipt
    })
})

const crashOf = (faults: ReadonlyArray<FaultyStore.Fault>) => faults.find((fault) => fault._tag === "Crash")?.point

/**
 * Plays one scenario: its deliveries at once (a duplicate may run beside the first), each retried
 * as the scenario says until it is acknowledged; a crash before the reservation does nothing, one
 * after the commit loses the acknowledgement. Yields every settlement the consumer decided.
 */
const play = (scenario: RetryProperty.Scenario, key: string, order: Orders.Order) =>
  Effect.gen(function*() {
    const live = yield* Orders.Payments
    const settled: Array<IdempotentConsumer.Settlement> = []
    yield* Effect.forEach(scenario.deliveries, (delivery) =>
      Effect.gen(function*() {
        for (const [i, attempt] of delivery.attempts.entries()) {
          const crash = crashOf(attempt.value.faults)
          if (crash === "beforeReserve") continue
          const settlement = yield* Orders.consumer.handle({ key, deliveryCount: i + 1 }, order).pipe(
            Effect.provideService(Orders.Payments, scripted(live, attempt.value.downstream[0], crash))
          )
          settled.push(settlement)
          if (settlement._tag !== "Retry" && crash !== "afterComplete") return
        }
      }), { concurrency: "unbounded", discard: true })
    return settled
  })

layer(Database, { excludeTestServices: true, timeout: "3 minutes" })("the order consumer's retry property", (it) => {
  it.effect.prop(
    "over RetryProperty's scenarios: one order row, one charge, one commit, and a last delivery acknowledged",
    [scenarios],
    ([scenario]) =>
      Effect.gen(function*() {
        const orderId = `prop-${randomUUID()}`
        const order = { orderId, sku: "BOOK-42", quantity: 1, amountCents: 1999 }
        const key = `msg-${orderId}`
        const settled = yield* play(scenario, key, order)
        // the probe: the message once more, on a healthy consumer
        const probe = yield* Orders.consumer.handle({ key, deliveryCount: 1 }, order)
        assert.strictEqual(probe._tag, "Ack", `the last delivery: ${JSON.stringify(probe)}`)
        assert.deepStrictEqual(yield* Orders.counts(orderId), [{ orderId, orders: 1, charges: 1 }])
        const committed = [...settled, probe].filter((s) => s._tag === "Ack" && !s.replayed)
        assert.strictEqual(committed.length, 1, "the deliveries that placed the order")
        assert.isFalse(settled.some((s) => s._tag === "Reject"), "no delivery was rejected")
      }),
    { timeout: 180_000, fastCheck: { numRuns: 200 } }
  )
})
