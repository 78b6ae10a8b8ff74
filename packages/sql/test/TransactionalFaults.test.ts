/**
 * The transactional mode when MariaDB stops answering, through a proxy in front of the run's
 * database: the attempt answers by its end (the request's deadline) whatever the database does, says
 * what is known of the transaction, and a retry then replays or executes once. A ROLLBACK that fails
 * leaves the run's own error in place.
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { SqlIdempotencyMigration, SqlTransactional } from "@effect-idempotency/sql"
import { TcpProxy, Timing } from "@effect-idempotency/testing"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"
import { layerClient, uniqueTable } from "./utils/databases.js"

const TABLE = uniqueTable("idem_tx_faults")
const ORDERS = uniqueTable("orders_tx_faults")

class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}

const Live = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* SqlIdempotencyMigration.migrate({ table: TABLE })
    yield* sql.unsafe(`CREATE TABLE ${ORDERS} (id VARCHAR(64) PRIMARY KEY, \`key\` VARCHAR(64) NOT NULL)`)
  })
).pipe(Layer.provideMerge(layerClient("mariadb")), Layer.orDie)

/** A proxy in front of the run's database, and a client whose connections go through it. */
const proxied = Effect.gen(function*() {
  const url = new URL(inject("mysqlUrl"))
  const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: Number(url.port) })
  url.port = String(proxy.port)
  const context = yield* Layer.build(MysqlClient.layer({ url: Redacted.make(url.toString()), maxConnections: 4 }))
  return { proxy, client: SqlClient.SqlClient.pipe(Effect.provide(context)), context }
}).pipe(Effect.orDie)

/** The user's rows of a key and the key's records, counted through the test's own client. */
const counts = (key: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const orders = yield* sql.unsafe<{ readonly n: number }>(`SELECT COUNT(*) AS n FROM ${ORDERS} WHERE \`key\` = ?`, [
      key
    ])
    const records = yield* sql.unsafe<{ readonly n: number; readonly status: string | null }>(
      `SELECT COUNT(*) AS n, MAX(status) AS status FROM ${TABLE} WHERE \`key\` = ?`,
      [key]
    )
    return { orders: Number(orders[0]!.n), records: Number(records[0]!.n), status: records[0]!.status }
  }).pipe(Effect.orDie)

/** An order row of the attempt's key, written through the attempt's `SqlClient`. */
const insertOrder = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const context = yield* IdempotencyContext.IdempotencyContext
  yield* sql.unsafe(`INSERT INTO ${ORDERS} (id, \`key\`) VALUES (?, ?)`, [randomUUID(), context.key])
})

const operation = <E>(
  name: string,
  execute: Effect.Effect<string, E, SqlClient.SqlClient | IdempotencyContext.IdempotencyContext>,
  options?: { readonly onFailure?: () => "release" }
) =>
  SqlTransactional.make({
    name,
    table: TABLE,
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

layer(Live, { excludeTestServices: true, timeout: "2 minutes" })("SqlTransactional faults (mariadb)", (it) => {
  it.scoped(
    "COMMIT sent, its answer held past the deadline: StoreUnavailable (commit) at the deadline; the retry replays",
    () =>
      Effect.gen(function*() {
        const { client, context, proxy } = yield* proxied
        const executions = yield* Ref.make(0)
        const op = operation(
          "tx-commit-held",
          Effect.as(Effect.zipRight(insertOrder, Ref.update(executions, (n) => n + 1)), "done")
        )
        const key = randomUUID()
        yield* client
        yield* proxy.stall({ hold: "answers", when: (bytes) => Buffer.from(bytes).includes("COMMIT") })
        const exit = yield* answeredWhileHeld(
          (deadline) => Effect.provide(op.run({ key, payload: { n: 1 }, deadline }), context),
          1_500
        )
        const error = failureOf(exit) as { readonly _tag: string; readonly method?: string }
        assert.deepStrictEqual({ tag: error._tag, method: error.method }, { tag: "StoreUnavailable", method: "commit" })

        // the COMMIT reached the database: once its answer is delivered, the key replays
        yield* proxy.resume
        yield* Timing.eventually(Effect.map(counts(key), (seen) => seen.records === 1), "the COMMIT was not applied")
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
      yield* Timing.eventually(
        Effect.map(counts(key), (seen) => seen.orders === 0 && seen.records === 0),
        "the cut connection's transaction was not rolled back"
      )
    }))
})
