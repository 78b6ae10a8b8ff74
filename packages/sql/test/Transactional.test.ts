/**
 * The transactional mode on MariaDB, SQLite (better-sqlite3) and libSQL (a file): what each exit
 * commits, counted from the database (the user's rows and the record), replays across the two
 * modes, a record the normal mode left in progress, and a race on one key with every exit counted.
 *
 * SQLite runs one writer at a time, and both clients hold one connection behind a semaphore: there
 * the race is a queue of transactions on one connection.
 */
import {
  Idempotency,
  IdempotencyContext,
  IdempotencyKey,
  IdempotencyPolicy,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { D1SqlClient, DurableObjectSqlClient, SqlIdempotencyStore, SqlTransactional } from "@effect-idempotency/sql"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { assert, describe, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import type { Engine } from "./utils/databases.js"
import { engines, layerClient, uniqueTable } from "./utils/databases.js"

const Order = Schema.Struct({ orderId: Schema.String, quantity: Schema.Int })
const NewOrder = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })
class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}

const payload = { sku: "A-1", quantity: 2 }

const failureOf = (exit: Exit.Exit<unknown, unknown>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  return Option.getOrUndefined(Cause.failureOption((exit as Exit.Failure<unknown, unknown>).cause))
}

const tagOf = (exit: Exit.Exit<unknown, unknown>): string => (failureOf(exit) as { readonly _tag: string })._tag

const suite = (engine: Engine) => {
  const TABLE = uniqueTable("idem_tx")
  const ORDERS = uniqueTable("orders_tx")
  const RACE = 200

  const Live = Layer.effectDiscard(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe(
        `CREATE TABLE ${ORDERS} (id VARCHAR(64) PRIMARY KEY, ${
          engine === "mariadb" ? "`key`" : "\"key\""
        } VARCHAR(64) NOT NULL, sku VARCHAR(64) NOT NULL, quantity INT)`
      ))
  ).pipe(
    Layer.provideMerge(SqlIdempotencyStore.layerWith({ table: TABLE, migrate: true })),
    Layer.provideMerge(layerClient(engine, { maxConnections: 20 })),
    Layer.orDie
  )

  const keyColumn = engine === "mariadb" ? "`key`" : "\"key\""

  /** The user's rows of a key and the key's records, counted by the database. */
  const counts = (key: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const orders = yield* sql.unsafe<{ readonly n: number }>(
        `SELECT COUNT(*) AS n FROM ${ORDERS} WHERE ${keyColumn} = ?`,
        [key]
      )
      const records = yield* sql.unsafe<{ readonly n: number; readonly status: string | null }>(
        `SELECT COUNT(*) AS n, MAX(status) AS status FROM ${TABLE} WHERE ${keyColumn} = ?`,
        [key]
      )
      return { orders: Number(orders[0]!.n), records: Number(records[0]!.n), status: records[0]!.status }
    }).pipe(Effect.orDie)

  /** A statement of the user's: an order row, written through the same `SqlClient`. */
  const insertOrder = (order: typeof NewOrder.Type) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const context = yield* IdempotencyContext.IdempotencyContext
      const orderId = randomUUID()
      yield* sql.unsafe(`INSERT INTO ${ORDERS} (id, ${keyColumn}, sku, quantity) VALUES (?, ?, ?, ?)`, [
        orderId,
        context.key,
        order.sku,
        order.quantity
      ])
      return { orderId, quantity: order.quantity }
    })

  const operation = <E = never>(
    name: string,
    execute: (
      order: typeof NewOrder.Type
    ) => Effect.Effect<typeof Order.Type, E, SqlClient.SqlClient | IdempotencyContext.IdempotencyContext>,
    options?: Partial<
      SqlTransactional.Options<
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
  ) =>
    SqlTransactional.make({
      name,
      table: TABLE,
      payload: NewOrder,
      success: Order,
      failure: OutOfStock,
      execute,
      ...options
    })

  layer(Live, { excludeTestServices: true, timeout: "3 minutes" })(`SqlTransactional on ${engine}`, (it) => {
    it.effect("a success commits the user's rows and the record together; a retry replays", () =>
      Effect.gen(function*() {
        const executions = yield* Ref.make(0)
        const op = operation(
          "tx-success",
          (order) => Effect.zipLeft(insertOrder(order), Ref.update(executions, (n) => n + 1))
        )
        const key = randomUUID()
        const first = yield* op.runDetailed({ key, payload })
        assert.isFalse(first.replayed)
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
        const retry = yield* op.runDetailed({ key, payload })
        assert.isTrue(retry.replayed)
        assert.deepStrictEqual(retry.value, first.value)
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
        assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
        assert.deepStrictEqual(yield* counts(key), { orders: 0, records: 1, status: "COMPLETED" })
        assert.instanceOf(failureOf(yield* Effect.exit(op.run({ key, payload }))), OutOfStock)
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
                fail
                  ? Effect.fail(new OutOfStock({ sku: order.sku }))
                  : Effect.succeed({ orderId: "o-2", quantity: 2 }))
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
        const error = failureOf(exit) as { readonly _tag: string; readonly rolledBack?: boolean }
        assert.deepStrictEqual({ tag: error._tag, rolledBack: error.rolledBack }, {
          tag: "DownstreamTimeout",
          rolledBack: true
        })
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
        assert.strictEqual(tagOf(conflict), "IdempotencyConflict")
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

    it.effect("a normal-mode record left in progress past its lease: taken over, unless onTimeout is markUnknown", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        // a normal-mode attempt that crashed, its lease over
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
        const refused = yield* Effect.exit(
          operation("tx-left-unknown", insertOrder, { onTimeout: "markUnknown" }).run({ key: unknown, payload })
        )
        const error = failureOf(refused) as { readonly _tag: string; readonly replayed?: boolean }
        assert.deepStrictEqual({ tag: error._tag, replayed: error.replayed }, {
          tag: "DownstreamTimeout",
          replayed: true
        })
        assert.deepStrictEqual(yield* counts(unknown), { orders: 0, records: 1, status: "IN_PROGRESS" })
        const result = yield* operation("tx-left-kept", insertOrder).runDetailed({ key: kept, payload })
        assert.deepStrictEqual({ replayed: result.replayed, attempt: result.attempt }, { replayed: false, attempt: 2 })
        assert.deepStrictEqual(yield* counts(kept), { orders: 1, records: 1, status: "COMPLETED" })
      }))

    it.effect("the same key with another request fails with KeyReused, and writes nothing", () =>
      Effect.gen(function*() {
        const key = randomUUID()
        const op = operation("tx-key-reused", insertOrder)
        yield* op.run({ key, payload })
        const reused = yield* Effect.exit(op.run({ key, payload: { sku: "B-2", quantity: 1 } }))
        assert.strictEqual(tagOf(reused), "KeyReused")
        assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
      }))

    it.effect(
      `${RACE} concurrent runs of one key: one committed execution; every exit counted`,
      () =>
        Effect.gen(function*() {
          const executions = yield* Ref.make(0)
          const op = operation(
            "tx-race",
            (order) => Effect.zipLeft(insertOrder(order), Ref.update(executions, (n) => n + 1)),
            { timeout: "20 seconds" }
          )
          const key = randomUUID()
          const exits = yield* Effect.all(
            Array.from({ length: RACE }, () => Effect.exit(op.runDetailed({ key, payload }))),
            { concurrency: "unbounded" }
          )
          const tally = new Map<string, number>()
          for (const exit of exits) {
            const tag = Exit.isSuccess(exit) ? (exit.value.replayed ? "replayed" : "executed") : tagOf(exit)
            tally.set(tag, (tally.get(tag) ?? 0) + 1)
          }
          // the one execution committed; every other run replayed it or met its transaction (a conflict)
          assert.strictEqual(yield* Ref.get(executions), 1)
          assert.strictEqual(tally.get("executed"), 1, JSON.stringify([...tally]))
          assert.strictEqual((tally.get("replayed") ?? 0) + (tally.get("IdempotencyConflict") ?? 0), RACE - 1)
          for (const exit of exits) {
            if (Exit.isSuccess(exit)) assert.deepStrictEqual(exit.value.value.quantity, 2)
          }
          assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
        }),
      { timeout: 120_000 }
    )

    it.effect("round trips: a first execution, a replay, and a replay while most attempts replay", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sent = { statements: 0, transactions: 0 }
        const counting = new Proxy(sql, {
          get(target, property, receiver) {
            const value = Reflect.get(target, property, receiver)
            if ((property !== "unsafe" && property !== "withTransaction") || typeof value !== "function") return value
            return (...args: Array<unknown>) => {
              if (property === "unsafe") sent.statements++
              else sent.transactions++
              return Reflect.apply(value, target, args)
            }
          }
        })
        const op = SqlTransactional.make({
          name: "tx-round-trips",
          table: TABLE,
          payload: NewOrder,
          success: Order,
          execute: insertOrder
        })
        const counted = (key: string) =>
          Effect.gen(function*() {
            const before = { ...sent }
            const result = yield* Effect.provideService(op.runDetailed({ key, payload }), SqlClient.SqlClient, counting)
            return {
              replayed: result.replayed,
              statements: sent.statements - before.statements,
              transactions: sent.transactions - before.transactions
            }
          })
        const key = randomUUID()
        // the reservation, the user's INSERT and the recording, in BEGIN … COMMIT
        assert.deepStrictEqual(yield* counted(key), { replayed: false, statements: 3, transactions: 1 })
        // MariaDB: the reservation answers the record; SQLite: the insert that wrote nothing, then the read
        const replay = engine === "mariadb" ? 1 : 2
        assert.deepStrictEqual(yield* counted(key), { replayed: true, statements: replay, transactions: 1 })
        for (let i = 0; i < 5; i++) yield* counted(key)
        // most recent attempts found a record: one read, outside a transaction
        assert.deepStrictEqual(yield* counted(key), { replayed: true, statements: 1, transactions: 0 })
      }))

    if (engine === "mariadb") {
      it.effect("a concurrent attempt's transaction holding the row past the time left: IdempotencyConflict, nothing written", () =>
        Effect.gen(function*() {
          const key = randomUUID()
          const started = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const holding = yield* Effect.fork(
            operation("tx-lock-wait", (order) =>
              Effect.zipLeft(
                insertOrder(order),
                Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release))
              )).run({ key, payload })
          )
          yield* Deferred.await(started)
          const waited = yield* Effect.exit(
            operation("tx-lock-wait", insertOrder, { timeout: "500 millis" }).run({ key, payload })
          )
          assert.strictEqual(tagOf(waited), "IdempotencyConflict")
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(holding)
          assert.deepStrictEqual(yield* counts(key), { orders: 1, records: 1, status: "COMPLETED" })
        }))
    }

    it.effect("runs on the store's table: the normal mode's store sees the committed record", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const key = randomUUID()
        yield* operation("tx-store-view", insertOrder).run({ key, payload })
        const id = IdempotencyRecord.makeRecordId({ operation: "tx-store-view", key: IdempotencyKey.unsafeMake(key) })
        const record = yield* store.get(id)
        assert.isTrue(Option.isSome(record) && record.value.status === "COMPLETED" && record.value.attempt === 1)
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
}

for (const engine of engines) suite(engine)

describe("SqlTransactional without interactive transactions", () => {
  const refused = (client: string, layerOf: Layer.Layer<SqlClient.SqlClient>) =>
    layer(layerOf, { excludeTestServices: true })(client, (it) => {
      it.effect("a run fails with TransactionsUnsupported, a StoreError, before anything is sent", () =>
        Effect.gen(function*() {
          let executions = 0
          const op = SqlTransactional.make({
            name: "tx-refused",
            payload: NewOrder,
            success: Order,
            execute: () => Effect.sync(() => (executions++, { orderId: "o", quantity: 1 }))
          })
          const error = failureOf(yield* Effect.exit(op.run({ key: randomUUID(), payload })))
          assert.isTrue(SqlTransactional.isTransactionsUnsupported(error))
          assert.strictEqual((error as { readonly _tag: string })._tag, "StoreError")
          assert.include((error as Error).message, "interactive transactions")
          assert.strictEqual(executions, 0)
        }))
    })

  const unreachable = () => {
    throw new Error("no statement may be sent")
  }
  refused("D1", D1SqlClient.layer({ prepare: unreachable }))
  refused("Durable Object", DurableObjectSqlClient.layer({ exec: unreachable }))
})
