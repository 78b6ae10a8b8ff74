/**
 * The transactional mode on the test database (the server when `TEST_PG_URL` is set, embedded
 * PGlite otherwise): what each exit commits, counted from the database (the user's rows and the
 * record), replays across the two modes in both directions, and a race on one key.
 *
 * PGlite runs one transaction at a time (pglite-socket queues every other connection behind it),
 * so there the race is a queue of 20; on the server it is 200 transactions through a pool of 20.
 */
import {
  Idempotency,
  IdempotencyContext,
  IdempotencyKey,
  IdempotencyPolicy,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { PgIdempotencyStore, PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { assert, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import type * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { layerClient, layerPrimary, resetTable, runTable, serverUrl } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_tx")
const ORDERS = runTable("orders_tx")
const table = Either.getOrThrow(PgIdempotencyTable.make({ table: TABLE }))
const RACE = serverUrl === undefined ? 20 : 200

const Order = Schema.Struct({ orderId: Schema.String, quantity: Schema.Int })
const NewOrder = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })
class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}

const Live = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* resetTable({ table: TABLE })
    yield* sql.unsafe(`DROP TABLE IF EXISTS ${ORDERS}`)
    yield* sql.unsafe(
      `CREATE TABLE ${ORDERS} (id text PRIMARY KEY, key text NOT NULL, sku text NOT NULL, quantity int)`
    )
  })
).pipe(
  Layer.provideMerge(PgIdempotencyStore.layerWith({ table: TABLE })),
  Layer.provideMerge(layerClient({ maxConnections: 20 })),
  Layer.provideMerge(layerPrimary)
)

/** The user's rows of a key and the key's records, counted by the database. */
const counts = (key: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const orders = yield* sql.unsafe<{ readonly n: number }>(
      `SELECT count(*)::int AS n FROM ${ORDERS} WHERE key = $1`,
      [
        key
      ]
    )
    const records = yield* sql.unsafe<{ readonly n: number; readonly status: string | null }>(
      `SELECT count(*)::int AS n, max(status) AS status FROM ${table.qualified} WHERE key = $1`,
      [key]
    )
    return { orders: orders[0]!.n, records: records[0]!.n, status: records[0]!.status }
  })

/** Two statements of the user's: an order row, written through the same `SqlClient`. */
const insertOrder = (order: typeof NewOrder.Type) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const context = yield* IdempotencyContext.IdempotencyContext
    const orderId = randomUUID()
    yield* sql`INSERT INTO ${
      sql(ORDERS)
    } (id, key, sku, quantity) VALUES (${orderId}, ${context.key}, ${order.sku}, ${order.quantity})`
    return { orderId, quantity: order.quantity }
  })

const operation = <E = never>(
  name: string,
  execute: (
    order: typeof NewOrder.Type
  ) => Effect.Effect<typeof Order.Type, E, SqlClient.SqlClient | IdempotencyContext.IdempotencyContext>,
  options?: Partial<
    PgTransactional.Options<
      typeof NewOrder.Type,
      typeof NewOrder.Encoded,
      typeof Order.Type,
      typeof Order.Encoded,
      E,
      SqlClient.SqlClient,
      OutOfStock,
      typeof OutOfStock.Encoded
    >
  >
) => PgTransactional.make({ name, table, payload: NewOrder, success: Order, failure: OutOfStock, execute, ...options })

const payload = { sku: "A-1", quantity: 2 }

const failureOf = (exit: Exit.Exit<unknown, unknown>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  return Option.getOrUndefined(Cause.failureOption((exit as Exit.Failure<unknown, unknown>).cause))
}

layer(Live, { excludeTestServices: true, timeout: "3 minutes" })("PgTransactional", (it) => {
  it.effect("a success commits the user's rows and the record together; a retry replays", () =>
    Effect.gen(function*() {
      const executions = yield* Ref.make(0)
      const op = operation("tx-success", (order) =>
        Effect.zipLeft(insertOrder(order), Ref.update(executions, (n) => n + 1)))
      const key = randomUUID()
      const first = yield* op.runDetailed({ key, payload })
      assert.isFalse(first.replayed)
      assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
      const retry = yield* op.runDetailed({ key, payload })
      assert.isTrue(retry.replayed)
      assert.deepStrictEqual(retry.value, first.value)
      // `Idempotency.result` sees the mode's runs as it sees the normal mode's
      const seen = yield* Idempotency.result(op.run({ key, payload }))
      assert.deepStrictEqual({ replayed: seen.replayed, attempt: seen.attempt }, { replayed: true, attempt: 1 })
      assert.strictEqual(yield* Ref.get(executions), 1)
      assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
    }))

  it.effect("a stored failure commits the record without the user's rows, and replays", () =>
    Effect.gen(function*() {
      const executions = yield* Ref.make(0)
      const op = operation("tx-stored-failure", (order) =>
        Effect.zipRight(
          Effect.zipRight(insertOrder(order), Ref.update(executions, (n) => n + 1)),
          Effect.fail(new OutOfStock({ sku: order.sku }))
        ))
      const key = randomUUID()
      const first = yield* Effect.exit(op.run({ key, payload }))
      assert.instanceOf(failureOf(first), OutOfStock)
      assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 1, status: "COMPLETED" })
      const retry = yield* Effect.exit(op.run({ key, payload }))
      assert.instanceOf(failureOf(retry), OutOfStock)
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.effect("markFailed commits a FAILED record without the user's rows; a retry takes it over", () =>
    Effect.gen(function*() {
      const fail = yield* Ref.make(true)
      const op = operation(
        "tx-mark-failed",
        (order) =>
          Effect.zipRight(
            insertOrder(order),
            Effect.flatMap(Ref.getAndSet(fail, false), (fail) =>
              fail ? Effect.fail(new OutOfStock({ sku: order.sku })) : Effect.succeed({ orderId: "o-2", quantity: 2 }))
          ),
        { onFailure: () => "markFailed" }
      )
      const key = randomUUID()
      assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
      assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 1, status: "FAILED" })
      const retry = yield* op.runDetailed({ key, payload })
      assert.deepStrictEqual({ replayed: retry.replayed, attempt: retry.attempt }, { replayed: false, attempt: 2 })
      assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
    }))

  const rolledBack = (
    name: string,
    execute: (
      order: typeof NewOrder.Type
    ) => Effect.Effect<
      typeof Order.Type,
      OutOfStock | SqlError,
      SqlClient.SqlClient | IdempotencyContext.IdempotencyContext
    >,
    check: (exit: Exit.Exit<typeof Order.Type, unknown>) => void,
    options?: { readonly timeout?: Duration.DurationInput; readonly onFailure?: () => "release" }
  ) =>
    it.effect(`${name} rolls back the user's rows and the record; a retry executes once`, () =>
      Effect.gen(function*() {
        const key = randomUUID()
        const op = operation(`tx-${name.replaceAll(" ", "-")}`, execute, options)
        check(yield* Effect.exit(op.run({ key, payload })))
        assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 0, status: null })
        const retry = yield* operation(`tx-${name.replaceAll(" ", "-")}`, insertOrder).runDetailed({ key, payload })
        assert.isFalse(retry.replayed)
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
      }))

  rolledBack(
    "a failure the policy releases",
    (order) => Effect.zipRight(insertOrder(order), Effect.fail(new OutOfStock({ sku: order.sku }))),
    (exit) => assert.instanceOf(failureOf(exit), OutOfStock),
    { onFailure: () => "release" }
  )

  rolledBack(
    "a defect",
    (order) => Effect.zipRight(insertOrder(order), Effect.dieMessage("boom")),
    (exit) => assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
  )

  rolledBack(
    "an interruption of the downstream",
    (order) => Effect.zipRight(insertOrder(order), Effect.interrupt),
    (exit) => assert.isTrue(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause))
  )

  rolledBack(
    "a timeout",
    (order) => Effect.zipRight(insertOrder(order), Effect.never),
    (exit) => {
      const error = failureOf(exit) as {
        readonly _tag: string
        readonly rolledBack?: boolean
        readonly message: string
      }
      assert.strictEqual(error._tag, "DownstreamTimeout")
      assert.isTrue(error.rolledBack)
      assert.include(error.message, "rolled back")
    },
    { timeout: "300 millis" }
  )

  it.effect("an interrupted caller rolls back the user's rows and the record", () =>
    Effect.gen(function*() {
      const key = randomUUID()
      const wrote = yield* Deferred.make<void>()
      const op = operation("tx-caller-interrupted", (order) =>
        Effect.zipLeft(insertOrder(order), Effect.zipRight(Deferred.succeed(wrote, undefined), Effect.never)))
      const fiber = yield* Effect.fork(op.run({ key, payload }))
      yield* Deferred.await(wrote)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 0, status: null })
    }))

  it.effect("a record of the transactional mode replays in the normal mode, and the other way round", () =>
    Effect.gen(function*() {
      const executions = yield* Ref.make(0)
      const execute = (order: typeof NewOrder.Type) =>
        Effect.zipLeft(insertOrder(order), Ref.update(executions, (n) => n + 1))
      const transactional = operation("tx-cross", execute)
      const normal = Idempotency.make({
        name: "tx-cross",
        payload: NewOrder,
        success: Order,
        failure: OutOfStock,
        execute
      })

      const a = randomUUID()
      const fresh = yield* transactional.runDetailed({ key: a, payload })
      const replayed = yield* normal.runDetailed({ key: a, payload })
      assert.deepStrictEqual({ replayed: replayed.replayed, value: replayed.value }, {
        replayed: true,
        value: fresh.value
      })

      const b = randomUUID()
      const freshNormal = yield* normal.runDetailed({ key: b, payload })
      const replayedTx = yield* transactional.runDetailed({ key: b, payload })
      assert.deepStrictEqual({ replayed: replayedTx.replayed, value: replayedTx.value }, {
        replayed: true,
        value: freshNormal.value
      })
      assert.strictEqual(yield* Ref.get(executions), 2)
      assert.deepStrictEqual(yield* counts(a), { orders: 1, records: 1, status: "COMPLETED" })
      assert.deepStrictEqual(yield* counts(b), { orders: 1, records: 1, status: "COMPLETED" })
    }))

  it.effect("a normal-mode attempt in progress gives IdempotencyConflict, or a wait until its outcome", () =>
    Effect.gen(function*() {
      const key = randomUUID()
      const release = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      const normal = Idempotency.make({
        name: "tx-in-progress",
        payload: NewOrder,
        success: Order,
        execute: () =>
          Effect.zipRight(
            Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release)),
            Effect.succeed({ orderId: "normal", quantity: 2 })
          )
      })
      const running = yield* Effect.fork(normal.run({ key, payload }))
      yield* Deferred.await(started)
      const conflict = yield* Effect.exit(operation("tx-in-progress", insertOrder).run({ key, payload }))
      assert.strictEqual((failureOf(conflict) as { readonly _tag: string })._tag, "IdempotencyConflict")
      const waiting = yield* Effect.fork(
        operation("tx-in-progress", insertOrder, {
          inProgress: IdempotencyPolicy.waitOnConflict(Schedule.spaced("20 millis"))
        }).runDetailed({ key, payload })
      )
      yield* Effect.sleep("100 millis")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(running)
      const waited = yield* Fiber.join(waiting)
      assert.deepStrictEqual({ replayed: waited.replayed, orderId: waited.value.orderId }, {
        replayed: true,
        orderId: "normal"
      })
      assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 1, status: "COMPLETED" })
    }))

  it.effect("the same key with another request fails with KeyReused, and writes nothing", () =>
    Effect.gen(function*() {
      const key = randomUUID()
      const op = operation("tx-key-reused", insertOrder)
      yield* op.run({ key, payload })
      const reused = yield* Effect.exit(op.run({ key, payload: { sku: "B-2", quantity: 1 } }))
      assert.strictEqual((failureOf(reused) as { readonly _tag: string })._tag, "KeyReused")
      assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
    }))

  it.effect(`${RACE} concurrent runs of one key: one committed execution, every other replays it`, () =>
    Effect.gen(function*() {
      const executions = yield* Ref.make(0)
      const op = operation(
        "tx-race",
        (order) => Effect.zipLeft(insertOrder(order), Ref.update(executions, (n) => n + 1))
      )
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

  it.effect("a normal-mode record left in progress past its lease: taken over, unless onTimeout is markUnknown", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      // a normal-mode attempt that crashed (no takeover: its operation is markUnknown), its lease over
      const crashed = (name: string) =>
        Effect.gen(function*() {
          const key = randomUUID()
          yield* store.reserve({
            id: IdempotencyRecord.makeRecordId({ operation: name, key: IdempotencyKey.unsafeMake(key) }),
            token: "crashed",
            fingerprint: yield* Idempotency.fingerprint(NewOrder, payload),
            lease: Duration.millis(100),
            ttl: Duration.hours(1),
            takeover: false
          })
          return key
        })
      const unknown = yield* crashed("tx-left-unknown")
      const kept = yield* crashed("tx-left-kept")
      yield* Effect.sleep("300 millis")
      // as the normal mode does under markUnknown: the outcome is unknown, nothing runs
      const refused = yield* Effect.exit(
        operation("tx-left-unknown", insertOrder, { onTimeout: "markUnknown" }).run({ key: unknown, payload })
      )
      const error = failureOf(refused) as { readonly _tag: string; readonly replayed?: boolean }
      assert.deepStrictEqual({ tag: error._tag, replayed: error.replayed }, {
        tag: "DownstreamTimeout",
        replayed: true
      })
      assert.deepStrictEqual(yield* counts(unknown), { orders: 0, records: 1, status: "IN_PROGRESS" })
      // the default: the lease is over, the record is taken over
      const result = yield* operation("tx-left-kept", insertOrder).runDetailed({ key: kept, payload })
      assert.deepStrictEqual({ replayed: result.replayed, attempt: result.attempt }, { replayed: false, attempt: 2 })
    }))

  it.effect("runs on the store's table: the normal mode's store sees the committed record", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const key = randomUUID()
      yield* operation("tx-store-view", insertOrder).run({ key, payload })
      const id = IdempotencyRecord.makeRecordId({ operation: "tx-store-view", key: IdempotencyKey.unsafeMake(key) })
      const record = yield* store.get(id)
      assert.isTrue(Option.isSome(record) && record.value.status === "COMPLETED" && record.value.attempt === 1)
    }))

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

  it.effect("inside a transaction of the caller's: the record commits, or rolls back, with the caller's", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const op = operation("tx-nested", insertOrder)
      const committed = randomUUID()
      yield* sql.withTransaction(op.run({ key: committed, payload, deadline: Date.now() + 10_000 }))
      assert.deepStrictEqual(yield* counts(committed), { orders: 1, records: 1, status: "COMPLETED" })

      const rolledBack = randomUUID()
      const exit = yield* Effect.exit(sql.withTransaction(
        Effect.zipRight(op.run({ key: rolledBack, payload }), Effect.fail("the caller's own failure" as const))
      ))
      assert.strictEqual(failureOf(exit), "the caller's own failure")
      assert.deepStrictEqual(yield* counts(rolledBack), { orders: 0, records: 0, status: null })
      const retry = yield* op.runDetailed({ key: rolledBack, payload })
      assert.isFalse(retry.replayed)
    }))
})
