/**
 * The transactional mode on MariaDB, SQLite (better-sqlite3) and libSQL (a file): the shared suite
 * of `@effect-idempotency/test-support` (what each exit commits, counted from the database, replays
 * across the two modes, a normal-mode record in progress or left past its lease), and on each a race
 * on one key with every exit counted, and its round trips; on MariaDB a lock wait past the time left.
 *
 * SQLite runs one writer at a time, and both clients hold one connection behind a semaphore: there
 * the race is a queue of transactions on one connection.
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { D1SqlClient, DurableObjectSqlClient, SqlIdempotencyStore, SqlTransactional } from "@effect-idempotency/sql"
import * as TransactionalSuite from "@effect-idempotency/test-support/TransactionalSuite"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import { randomUUID } from "node:crypto"
import type { Engine } from "./utils/databases.js"
import { createOrders, engines, layerClient, transactionalCounts, uniqueTable } from "./utils/databases.js"

const { failureOf, NewOrder, Order, OutOfStock, payload, tagOf } = TransactionalSuite

const suite = (engine: Engine) => {
  const TABLE = uniqueTable("idem_tx")
  const ORDERS = uniqueTable("orders_tx")
  const RACE = 200
  const keyColumn = engine === "mariadb" ? "`key`" : "\"key\""

  const Live = Layer.effectDiscard(createOrders(engine, ORDERS)).pipe(
    Layer.provideMerge(SqlIdempotencyStore.layerWith({ table: TABLE, migrate: true })),
    Layer.provideMerge(layerClient(engine, { maxConnections: 20 })),
    Layer.orDie
  )

  const mode: TransactionalSuite.Mode = {
    operation: (name, execute, settings) =>
      SqlTransactional.make({
        name,
        table: TABLE,
        payload: NewOrder,
        success: Order,
        failure: OutOfStock,
        execute,
        ...settings
      }),
    // a statement of the user's: an order row, written through the same `SqlClient`
    insertOrder: (order) =>
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
      }),
    counts: transactionalCounts(engine, ORDERS, TABLE)
  }
  const { counts, insertOrder } = mode

  TransactionalSuite.suite(`SqlTransactional on ${engine}`, Live, mode, (it) => {
    it.effect(
      `${RACE} concurrent runs of one key: one committed execution; every exit counted`,
      () =>
        Effect.gen(function*() {
          const { executions, op } = yield* TransactionalSuite.countingOperation(mode, "tx-race", {
            timeout: "20 seconds"
          })
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
      TransactionalSuite.lockWait(it, mode)
    }
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
