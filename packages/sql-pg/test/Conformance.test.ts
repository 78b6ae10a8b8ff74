/**
 * The shared conformance suite and the exit-path suite, on embedded PGlite always (so the fallback
 * of a machine without a server keeps working) and on the PostgreSQL server when `TEST_PG_URL`
 * names one.
 *
 * The suites drive expiry with `TestClock`, so the store reads Effect's `Clock` there. The
 * conformance suite also runs with the store's default, the database's clock: there, moving time
 * forward shifts every timestamp of the suite's table back by the same amount.
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import { ExitPaths, StoreConformance } from "@effect-idempotency/testing"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type { Database, TestDatabase } from "./utils/TestDatabase.js"
import { layerPglite, layerServer, layerStoreOn, runTable, serverUrl } from "./utils/TestDatabase.js"

/** The SQL client of a database-clock suite, once its layer is built: `advance` needs it. */
interface Shifter {
  sql: SqlClient.SqlClient | undefined
}

const store = (
  database: Layer.Layer<TestDatabase>,
  name: string,
  clock: IdempotencyStore.ClockSource,
  shifter?: Shifter
) =>
  layerStoreOn(database, name, clock, {
    maxConnections: 10,
    onClient: (sql) => {
      if (shifter !== undefined) shifter.sql = sql
    }
  })

/** Moves the database's clock forward for one table: every timestamp of the table moves back. */
const shiftBack = (shifter: Shifter, table: string) => (duration: Duration.Duration) =>
  Effect.suspend(() => {
    const sql = shifter.sql
    if (sql === undefined) return Effect.dieMessage("the suite's store is not built yet")
    const qualified = PgIdempotencyTable.quote(table)
    return sql.unsafe(
      `UPDATE ${qualified} SET lease_until = lease_until - $1, expires_at = expires_at - $1`,
      [Math.ceil(Duration.toMillis(duration))]
    ).withoutTransform.pipe(Effect.orDie, Effect.asVoid)
  })

const suite = (kind: Database["kind"], database: Layer.Layer<TestDatabase>) => {
  StoreConformance.suite(
    `PgIdempotencyStore conformance (${kind})`,
    store(database, "idem_conformance", "effect"),
    { timeout: "2 minutes" }
  )
  const shifter: Shifter = { sql: undefined }
  StoreConformance.suite(
    `PgIdempotencyStore conformance (${kind}, the database's clock)`,
    store(database, "idem_conformance_db", "server", shifter),
    { timeout: "2 minutes", advance: shiftBack(shifter, runTable("idem_conformance_db")) }
  )
  ExitPaths.suite(`PgIdempotencyStore exit paths (${kind})`, store(database, "idem_exit_paths", "effect"), {
    timeout: "2 minutes"
  })
}

suite("pglite", layerPglite)

if (serverUrl !== undefined) {
  suite("server", layerServer(serverUrl))
}
