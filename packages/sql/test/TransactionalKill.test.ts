/**
 * The transactional mode's process killed (SIGKILL) at every point of its transaction, then a retry,
 * on MariaDB, SQLite (better-sqlite3) and libSQL (a file): the user's rows and the record are both
 * there exactly once (the retry replays) or both absent (the retry executes once), counted from the
 * database. The child process is `utils/transactionalChild.ts`.
 */
import { SqlIdempotencyMigration, SqlTransactional } from "@effect-idempotency/sql"
import { Children } from "@effect-idempotency/test-support"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, inject } from "vitest"
import type { Engine } from "./utils/databases.js"
import { engines, layerClient, uniqueTable } from "./utils/databases.js"

const CHILD = fileURLToPath(new URL("./utils/transactionalChild.ts", import.meta.url))

/** Runs the child until it prints `PAUSED <point>` (or `DONE`), then kills it with SIGKILL. */
const runAndKill = (args: ReadonlyArray<string>) => Children.runUntilMarker(CHILD, args)

const POINTS = [
  { point: "before-reserve", committed: false },
  { point: "after-first-statement", committed: false },
  { point: "before-commit", committed: false },
  { point: "after-commit", committed: true },
  { point: "none", committed: true }
] as const

const suite = (engine: Engine) => {
  const TABLE = uniqueTable("idem_tx_kill")
  const ORDERS = uniqueTable("orders_tx_kill")
  // SQLite and libSQL: a file both processes open
  const file = engine === "mariadb"
    ? undefined
    : path.join(fs.mkdtempSync(path.join(os.tmpdir(), "effect-idempotency-sql-kill-")), "records.db")
  const database = file ?? inject("mysqlUrl")
  const keyColumn = engine === "mariadb" ? "`key`" : "\"key\""

  const Live = Layer.effectDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* SqlIdempotencyMigration.migrate({ table: TABLE })
      yield* sql.unsafe(`CREATE TABLE ${ORDERS} (id VARCHAR(80) PRIMARY KEY, sku VARCHAR(64) NOT NULL)`)
    })
  ).pipe(
    Layer.provideMerge(layerClient(engine, file === undefined ? { maxConnections: 4 } : { file })),
    Layer.orDie
  )

  const counts = (key: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const orders = yield* sql.unsafe<{ readonly n: number }>(
        `SELECT COUNT(*) AS n FROM ${ORDERS} WHERE id LIKE ?`,
        [`${key}-%`]
      )
      const records = yield* sql.unsafe<{ readonly n: number }>(
        `SELECT COUNT(*) AS n FROM ${TABLE} WHERE ${keyColumn} = ? AND status = 'COMPLETED'`,
        [key]
      )
      return { orders: Number(orders[0]!.n), records: Number(records[0]!.n) }
    }).pipe(Effect.orDie)

  /** The retry, in this process: the same operation as the child's, counting its executions. */
  const retry = (key: string) =>
    Effect.gen(function*() {
      let executions = 0
      const operation = SqlTransactional.make({
        name: "tx-kill",
        table: TABLE,
        payload: Schema.Struct({ sku: Schema.String }),
        success: Schema.Struct({ lines: Schema.Int }),
        execute: ({ sku }) =>
          Effect.gen(function*() {
            executions++
            const sql = yield* SqlClient.SqlClient
            for (const line of [1, 2]) {
              yield* sql.unsafe(`INSERT INTO ${ORDERS} (id, sku) VALUES (?, ?)`, [`${key}-${line}`, sku])
            }
            return { lines: 2 }
          })
      })
      const result = yield* operation.runDetailed({ key, payload: { sku: "A-1" } })
      return { replayed: result.replayed, executions }
    })

  if (file !== undefined) afterAll(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }))

  layer(Live, { excludeTestServices: true, timeout: "3 minutes" })(`SqlTransactional killed (${engine})`, (it) => {
    for (const { committed, point } of POINTS) {
      it.effect(`killed at ${point}: a retry ${committed ? "replays" : "executes once"}`, () =>
        Effect.gen(function*() {
          const key = randomUUID()
          const marker = yield* runAndKill([engine, database, TABLE, ORDERS, key, point])
          assert.include(marker, point === "none" ? "DONE" : `PAUSED ${point}`)
          // both or neither, before the retry
          assert.deepStrictEqual(yield* counts(key), committed ? { orders: 2, records: 1 } : { orders: 0, records: 0 })
          const again = yield* retry(key)
          assert.deepStrictEqual(
            again,
            committed ? { replayed: true, executions: 0 } : { replayed: false, executions: 1 }
          )
          assert.deepStrictEqual(yield* counts(key), { orders: 2, records: 1 })
        }), { timeout: 60_000 })
    }
  })
}

for (const engine of engines) suite(engine)
