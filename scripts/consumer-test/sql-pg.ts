/**
 * The PostgreSQL README's snippets on embedded PostgreSQL (PGlite served on a loopback port): the
 * migration through `PgMigrator`, then the program, twice; the second run is a replay and one record
 * is stored.
 */
import { Idempotency } from "@effect-idempotency/core"
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { deepStrictEqual, strictEqual } from "node:assert"
import { startPostgres } from "./embedded.mjs"
import { migrate } from "./snippets/sql-pg-migrate.js"
import { createOrder, program, SqlLive, StoreLive } from "./snippets/sql-pg.js"

const postgres = await startPostgres()
process.env.DATABASE_URL = postgres.url

try {
  await Effect.runPromise(migrate.pipe(Effect.provide(Layer.merge(SqlLive, NodeContext.layer))))
  const first = await Effect.runPromise(program)
  const again = await Effect.runPromise(program)
  deepStrictEqual(again, first, "the second run returns the recorded order")
  const replay = await Effect.runPromise(
    Idempotency.result(createOrder.run({ key: "3f0c5c9e-client-key", payload: { sku: "A-1", quantity: 2 } })).pipe(
      Effect.provide(StoreLive)
    )
  )
  strictEqual(replay.replayed, true, "a later run is a replay")
  const rows = await Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM idempotency_records`)
      .pipe(Effect.provide(SqlLive))
  )
  strictEqual(rows[0]?.n, 1, "one record")
  console.log(`sql-pg: ${JSON.stringify(first)} recorded once on embedded PostgreSQL, then replayed`)
} finally {
  await postgres.stop()
}
