/**
 * The transactional mode's process killed (SIGKILL) at every point of its transaction, then a
 * retry: the user's rows and the record are both there exactly once (the retry replays) or both
 * absent (the retry executes once), counted from the database.
 *
 * The child process (`utils/transactionalChild.ts`) connects to the test database: the server
 * named by `TEST_PG_URL`, or the PGlite of this process through its socket server (which rolls a
 * dead connection's transaction back, as the server does).
 */
import { PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import { Children } from "@effect-idempotency/test-support"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"
import { layerClient, layerPrimary, resetTable, runTable, TestDatabase } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_tx_kill")
const ORDERS = runTable("orders_tx_kill")
const table = Either.getOrThrow(PgIdempotencyTable.make({ table: TABLE }))
const CHILD = fileURLToPath(new URL("./utils/transactionalChild.ts", import.meta.url))

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
  Layer.provideMerge(layerClient({ maxConnections: 4 })),
  Layer.provideMerge(layerPrimary)
)

/** Runs the child until it prints `PAUSED <point>` (or `DONE`), then kills it with SIGKILL. */
const runAndKill = (url: string, key: string, point: string) =>
  Children.runUntilMarker(CHILD, [url, TABLE, ORDERS, key, point])

const counts = (key: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const orders = yield* sql.unsafe<{ readonly n: number }>(
      `SELECT count(*)::int AS n FROM ${ORDERS} WHERE key = $1`,
      [
        key
      ]
    )
    const records = yield* sql.unsafe<{ readonly n: number }>(
      `SELECT count(*)::int AS n FROM ${table.qualified} WHERE key = $1 AND status = 'COMPLETED'`,
      [key]
    )
    return { orders: orders[0]!.n, records: records[0]!.n }
  })

/** The retry, in this process: the same operation as the child's, counting its executions. */
const retry = (key: string) =>
  Effect.gen(function*() {
    let executions = 0
    const operation = PgTransactional.make({
      name: "tx-kill",
      table,
      payload: Schema.Struct({ sku: Schema.String }),
      success: Schema.Struct({ lines: Schema.Int }),
      execute: ({ sku }) =>
        Effect.gen(function*() {
          executions++
          const sql = yield* SqlClient.SqlClient
          for (const line of [1, 2]) {
            yield* sql.unsafe(`INSERT INTO ${ORDERS} (id, key, sku, quantity) VALUES ($1, $2, $3, 1)`, [
              `${key}-${line}`,
              key,
              sku
            ])
          }
          return { lines: 2 }
        })
    })
    const result = yield* operation.runDetailed({ key, payload: { sku: "A-1" } })
    return { replayed: result.replayed, executions }
  })

const POINTS = [
  { point: "before-reserve", committed: false },
  { point: "after-first-statement", committed: false },
  { point: "before-commit", committed: false },
  { point: "after-commit", committed: true },
  { point: "none", committed: true }
] as const

layer(Live, { excludeTestServices: true, timeout: "3 minutes" })("PgTransactional killed", (it) => {
  for (const { committed, point } of POINTS) {
    it.effect(`killed at ${point}: a retry ${committed ? "replays" : "executes once"}`, () =>
      Effect.gen(function*() {
        const database = yield* TestDatabase
        const key = randomUUID()
        const marker = yield* runAndKill(database.url, key, point)
        assert.include(marker, point === "none" ? "DONE" : `PAUSED ${point}`)
        // both or neither, before the retry
        const before = yield* counts(key)
        assert.deepStrictEqual(before, committed ? { orders: 2, records: 1 } : { orders: 0, records: 0 })
        const again = yield* retry(key)
        assert.deepStrictEqual(
          again,
          committed ? { replayed: true, executions: 0 } : { replayed: false, executions: 1 }
        )
        assert.deepStrictEqual(yield* counts(key), { orders: 2, records: 1 })
      }), { timeout: 60_000 })
  }
})
