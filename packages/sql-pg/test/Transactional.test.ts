/**
 * The transactional mode on the test database (the server when `TEST_PG_URL` is set, embedded
 * PGlite otherwise): the shared suite of `@effect-idempotency/test-support` (what each exit commits,
 * counted from the database, replays across the two modes, a normal-mode record in progress or
 * left past its lease), and PostgreSQL's own cases: a race on one key, a row lock held past the time
 * left (on the server), and the attempts' metric.
 *
 * PGlite runs one transaction at a time (its test server queues every other connection behind it),
 * so there the race is a queue of 20; on the server it is 200 transactions through a pool of 20.
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { PgIdempotencyStore, PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import * as TransactionalSuite from "@effect-idempotency/test-support/TransactionalSuite"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import type * as MetricState from "effect/MetricState"
import * as Ref from "effect/Ref"
import { randomUUID } from "node:crypto"
import { transactionalCounts } from "./utils/fixtures.js"
import { layerSetUp, resetOrderTables, runTable, serverUrl } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_tx")
const ORDERS = runTable("orders_tx")
const table = Either.getOrThrow(PgIdempotencyTable.make({ table: TABLE }))
const RACE = serverUrl === undefined ? 20 : 200

const { NewOrder, Order, OutOfStock, payload } = TransactionalSuite

const Live = PgIdempotencyStore.layerWith({ table: TABLE }).pipe(
  Layer.provideMerge(layerSetUp(resetOrderTables(TABLE, ORDERS), { maxConnections: 20 }))
)

const mode: TransactionalSuite.Mode = {
  operation: (name, execute, settings) =>
    PgTransactional.make({ name, table, payload: NewOrder, success: Order, failure: OutOfStock, execute, ...settings }),
  // two statements of the user's: an order row, written through the same `SqlClient`
  insertOrder: (order) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const context = yield* IdempotencyContext.IdempotencyContext
      const orderId = randomUUID()
      yield* sql`INSERT INTO ${
        sql(ORDERS)
      } (id, key, sku, quantity) VALUES (${orderId}, ${context.key}, ${order.sku}, ${order.quantity})`
      return { orderId, quantity: order.quantity }
    }),
  counts: transactionalCounts(ORDERS, table.qualified)
}

TransactionalSuite.suite("PgTransactional", Live, mode, (it) => {
  const { counts, insertOrder, operation } = mode

  it.effect(`${RACE} concurrent runs of one key: one committed execution, every other replays it`, () =>
    Effect.gen(function*() {
      const { executions, op } = yield* TransactionalSuite.countingOperation(mode, "tx-race")
      const key = randomUUID()
      const results = yield* Effect.all(
        Array.from({ length: RACE }, () => op.runDetailed({ key, payload })),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(yield* Ref.get(executions), 1)
      assert.strictEqual(results.filter((result) => !result.replayed).length, 1)
      for (const result of results) assert.deepStrictEqual(result.value, results[0]!.value)
      assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
    }))

  // PGlite runs one transaction at a time: a second never waits on a row lock there, it waits in line
  if (serverUrl !== undefined) {
    // its lock_timeout (set by the reservation's own statement) ends the wait
    TransactionalSuite.lockWait(
      it,
      mode,
      Effect.map(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ readonly waiting: number }>`SELECT count(*)::int AS waiting FROM pg_locks WHERE NOT granted`
        ),
        (rows) => rows[0]!.waiting
      )
    )
  }

  it.effect("its runs count in idempotency.attempts by operation and outcome, as the normal mode's do", () =>
    Effect.gen(function*() {
      const name = `tx-metered-${randomUUID()}`
      const op = operation(name, insertOrder)
      const key = randomUUID()
      yield* op.run({ key, payload })
      yield* op.run({ key, payload })
      yield* Effect.flip(op.run({ key, payload: { sku: "B-2", quantity: 1 } }))
      const counts = new Map<string, number>()
      for (const pair of yield* Metric.snapshot) {
        const labels = new Map(pair.metricKey.tags.map((tag) => [tag.key, tag.value]))
        if (pair.metricKey.name !== "idempotency.attempts" || labels.get("idempotency.operation") !== name) continue
        counts.set(
          labels.get("idempotency.outcome")!,
          (pair.metricState as MetricState.MetricState.Counter<number>).count
        )
      }
      assert.deepStrictEqual(Object.fromEntries(counts), { executed: 1, replayed: 1, key_reused: 1 })
    }))
})
