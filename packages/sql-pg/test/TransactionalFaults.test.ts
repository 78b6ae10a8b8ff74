/**
 * The transactional mode when the database stops answering, through a proxy in front of the test
 * database: the attempt answers by its end (the request's deadline) whatever the store does, says
 * what is known of the transaction, and a retry then replays or executes once. A ROLLBACK that
 * fails leaves the run's own error in place.
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import { TcpProxy, Timing } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { layerClient, layerPrimary, resetTable, runTable, TestDatabase } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_tx_faults")
const ORDERS = runTable("orders_tx_faults")
const table = Either.getOrThrow(PgIdempotencyTable.make({ table: TABLE }))

class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}

const Live = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* resetTable({ table: TABLE })
    yield* sql.unsafe(`DROP TABLE IF EXISTS ${ORDERS}`)
    yield* sql.unsafe(`CREATE TABLE ${ORDERS} (id text PRIMARY KEY, key text NOT NULL)`)
  })
).pipe(
  Layer.provideMerge(layerClient()),
  Layer.provideMerge(layerPrimary)
)

/** A proxy in front of the test database, and an `SqlClient` whose connections go through it. */
const proxied = Effect.gen(function*() {
  const database = yield* TestDatabase
  const proxy = yield* TcpProxy.make(database)
  const url = new URL(database.url)
  url.host = `127.0.0.1:${proxy.port}`
  const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url.toString()), maxConnections: 4 }))
  return { proxy, client: SqlClient.SqlClient.pipe(Effect.provide(context)), context }
})

/** The user's rows of a key and the key's records, counted through the test database's own client. */
const counts = (key: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const orders = yield* sql.unsafe<{ readonly n: number }>(
      `SELECT count(*)::int AS n FROM ${ORDERS} WHERE key = $1`,
      [key]
    )
    const records = yield* sql.unsafe<{ readonly n: number; readonly status: string | null }>(
      `SELECT count(*)::int AS n, max(status) AS status FROM ${table.qualified} WHERE key = $1`,
      [key]
    )
    return { orders: orders[0]!.n, records: records[0]!.n, status: records[0]!.status }
  })

/** An order row of the attempt's key, written through the attempt's `SqlClient`. */
const insertOrder = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const context = yield* IdempotencyContext.IdempotencyContext
  yield* sql`INSERT INTO ${sql(ORDERS)} (id, key) VALUES (${randomUUID()}, ${context.key})`
})

const operation = <E>(
  name: string,
  execute: Effect.Effect<string, E, SqlClient.SqlClient | IdempotencyContext.IdempotencyContext>,
  options?: { readonly onFailure?: () => "release" }
) =>
  PgTransactional.make({
    name,
    table,
    payload: Schema.Struct({ n: Schema.Int }),
    success: Schema.String,
    execute: () => execute,
    ...options
  })

const failureOf = (exit: Exit.Exit<unknown, unknown>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  return Option.getOrUndefined(Cause.failureOption((exit as Exit.Failure<unknown, unknown>).cause))
}

/** Runs `run` with a deadline `millis` away; it must answer while the proxy still holds (or 20 s at most). */
const answeredWhileHeld = <A, E>(run: (deadline: number) => Effect.Effect<A, E>, millis: number) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(run(Date.now() + millis))
    const exit = yield* Fiber.await(fiber).pipe(Effect.timeout("20 seconds"), Effect.option)
    assert.isTrue(Option.isSome(exit), "the attempt did not answer by its deadline while the database held it")
    return (exit as Option.Some<Exit.Exit<A, E>>).value
  })

layer(Live, { excludeTestServices: true, timeout: "2 minutes" })("PgTransactional faults", (it) => {
  it.scoped(
    "COMMIT sent, its answer held past the deadline: StoreUnavailable (commit) at the deadline; the retry replays",
    () =>
      Effect.gen(function*() {
        const { client, context, proxy } = yield* proxied
        const executions = yield* Ref.make(0)
        const op = operation(
          "tx-commit-held",
          Effect.as(
            Effect.zipRight(
              insertOrder,
              Ref.update(executions, (n) => n + 1)
            ),
            "done"
          )
        )
        const key = randomUUID()
        yield* client // the pool's first connection, before the stall is armed
        yield* proxy.stall({ hold: "answers", when: (bytes) => Buffer.from(bytes).includes("COMMIT") })
        const exit = yield* answeredWhileHeld(
          (deadline) => Effect.provide(op.run({ key, payload: { n: 1 }, deadline }), context),
          1_500
        )
        const error = failureOf(exit) as { readonly _tag: string; readonly method?: string }
        assert.deepStrictEqual({ tag: error._tag, method: error.method }, { tag: "StoreUnavailable", method: "commit" })

        // the COMMIT reached the database: once its answer is delivered, the key replays
        yield* proxy.resume
        yield* Timing.eventually(
          Effect.map(counts(key), (seen) => seen.records === 1),
          "the COMMIT was not applied"
        )
        const retry = yield* Effect.provide(op.runDetailed({ key, payload: { n: 1 } }), context)
        assert.deepStrictEqual({ replayed: retry.replayed, value: retry.value }, { replayed: true, value: "done" })
        assert.strictEqual(yield* Ref.get(executions), 1)
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
      })
  )

  it.scoped(
    "the recording's answer held past the deadline: DownstreamTimeout, rolled back, at the deadline; the retry executes once",
    () =>
      Effect.gen(function*() {
        const { context, proxy } = yield* proxied
        const executions = yield* Ref.make(0)
        const op = operation(
          "tx-record-held",
          insertOrder.pipe(
            Effect.zipRight(Ref.updateAndGet(executions, (n) => n + 1)),
            // the first execution's recording gets no answer
            Effect.tap((n) => n === 1 ? proxy.stall({ hold: "answers" }) : Effect.void),
            Effect.as("done")
          )
        )
        const key = randomUUID()
        const exit = yield* answeredWhileHeld(
          (deadline) => Effect.provide(op.run({ key, payload: { n: 1 }, deadline }), context),
          1_500
        )
        const error = failureOf(exit) as { readonly _tag: string; readonly rolledBack?: boolean }
        assert.deepStrictEqual({ tag: error._tag, rolledBack: error.rolledBack }, {
          tag: "DownstreamTimeout",
          rolledBack: true
        })

        yield* proxy.resume
        const retry = yield* Effect.provide(op.runDetailed({ key, payload: { n: 1 } }), context)
        assert.isFalse(retry.replayed)
        assert.strictEqual(yield* Ref.get(executions), 2)
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
      })
  )

  it.scoped("a ROLLBACK that fails (the connection is gone): the run fails with the downstream's own error", () =>
    Effect.gen(function*() {
      const { context, proxy } = yield* proxied
      const op = operation(
        "tx-rollback-fails",
        insertOrder.pipe(Effect.zipRight(proxy.cut), Effect.zipRight(Effect.fail(new OutOfStock({ sku: "A-1" })))),
        { onFailure: () => "release" }
      )
      const key = randomUUID()
      const exit = yield* Effect.exit(Effect.provide(op.run({ key, payload: { n: 1 } }), context))
      assert.instanceOf(failureOf(exit), OutOfStock)
      assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 0, status: null })
    }))
})
