/**
 * The PostgreSQL snippets on embedded PostgreSQL (PGlite served on a loopback port): the root README's
 * store on the fresh database (its `migrate: true` creates the table); then the package README's
 * migration through `PgMigrator` and its program, twice: the second run is a replay, and the two keys
 * are two records.
 */
import { Idempotency } from "@effect-idempotency/core"
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { strictEqual } from "node:assert"
import { runTwiceThenReplay, startPostgres } from "./embedded.mjs"
import { StoreLive as RootStoreLive } from "./snippets/readme-sql-pg.js"
import { migrate } from "./snippets/sql-pg-migrate.js"
import { createOrder, program, SqlLive, StoreLive } from "./snippets/sql-pg.js"

const postgres = await startPostgres()
process.env.DATABASE_URL = postgres.url

try {
  const root = await Effect.runPromise(
    Idempotency.result(createOrder.run({ key: "root-readme-key", payload: { sku: "B-2", quantity: 1 } })).pipe(
      Effect.provide(RootStoreLive)
    )
  )
  strictEqual(root.replayed, false, "the root README's store migrated the fresh database and executed")
  await Effect.runPromise(migrate.pipe(Effect.provide(Layer.merge(SqlLive, NodeContext.layer))))
  const first = await runTwiceThenReplay({ createOrder, program, StoreLive })
  const rows = await Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM idempotency_records`)
      .pipe(Effect.provide(SqlLive))
  )
  strictEqual(rows[0]?.n, 2, "one record per key")
  console.log(`sql-pg: ${JSON.stringify(first)} recorded once on embedded PostgreSQL, then replayed`)
} finally {
  await postgres.stop()
}
