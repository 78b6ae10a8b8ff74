/**
 * The shared conformance, admin and exit-path suites, on each engine: the run's MariaDB server,
 * SQLite (`better-sqlite3`) and libSQL (a local file).
 *
 * The suites drive expiry with `TestClock`, so the store reads Effect's `Clock` there. The
 * conformance suite also runs with the store's default, the database's clock: there, moving time
 * forward shifts every timestamp of the suite's table back by the same amount.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { AdminConformance, ExitPaths, StoreConformance } from "@effect-idempotency/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Engine } from "./utils/databases.js"
import { engines, layerClient, shiftBack, uniqueTable } from "./utils/databases.js"

/** The SQL client of a database-clock suite, once its layer is built: `advance` needs it. */
interface Shifter {
  sql: SqlClient.SqlClient | undefined
}

const store = (engine: Engine, table: string, clock: IdempotencyStore.ClockSource, shifter?: Shifter) =>
  Layer.effect(
    IdempotencyStore.IdempotencyStore,
    Effect.gen(function*() {
      if (shifter !== undefined) shifter.sql = yield* SqlClient.SqlClient
      return yield* SqlIdempotencyStore.make({ table, clock, migrate: true })
    })
  ).pipe(Layer.provide(layerClient(engine)), Layer.orDie)

for (const engine of engines) {
  StoreConformance.suite(
    `SqlIdempotencyStore conformance (${engine})`,
    store(engine, uniqueTable("idem_conformance"), "effect"),
    { timeout: "2 minutes" }
  )
  const shifter: Shifter = { sql: undefined }
  const table = uniqueTable("idem_conformance_db")
  StoreConformance.suite(
    `SqlIdempotencyStore conformance (${engine}, the database's clock)`,
    store(engine, table, "server", shifter),
    {
      timeout: "2 minutes",
      advance: (duration) =>
        Effect.suspend(() =>
          shifter.sql === undefined
            ? Effect.dieMessage("the suite's store is not built yet")
            : Effect.provideService(
              shiftBack(table, engine, Math.ceil(Duration.toMillis(duration))),
              SqlClient.SqlClient,
              shifter.sql
            )
        )
    }
  )
  AdminConformance.suite(
    `SqlIdempotencyStore admin (${engine})`,
    store(engine, uniqueTable("idem_admin"), "effect"),
    { timeout: "2 minutes" }
  )
  StoreConformance.serverClockSuite(
    `SqlIdempotencyStore with the database's clock (${engine})`,
    Layer.effect(
      IdempotencyStore.IdempotencyStore,
      SqlIdempotencyStore.make({ table: uniqueTable("idem_clock"), migrate: true })
    )
      .pipe(Layer.provideMerge(layerClient(engine)), Layer.orDie),
    {
      // the database's clock in epoch milliseconds, read independently of the store's statements
      now: Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.unsafe(
          engine === "mariadb"
            ? "SELECT UNIX_TIMESTAMP(NOW(3)) * 1000 AS ms"
            : "SELECT (unixepoch('subsec') * 1000) AS ms"
        ).withoutTransform.pipe(Effect.map((rows) => Math.round(Number((rows[0] as { readonly ms: unknown }).ms))))),
      timeout: "2 minutes"
    }
  )
  ExitPaths.suite(
    `SqlIdempotencyStore exit paths (${engine})`,
    store(engine, uniqueTable("idem_exit_paths"), "effect"),
    { timeout: "2 minutes" }
  )
}

// libSQL can give integers as bigints or strings: the store reads them as it reads numbers
for (const intMode of ["bigint", "string"] as const) {
  StoreConformance.suite(
    `SqlIdempotencyStore conformance (libsql, intMode ${intMode})`,
    Layer.effect(
      IdempotencyStore.IdempotencyStore,
      SqlIdempotencyStore.make({ table: uniqueTable("idem_int_mode"), clock: "effect", migrate: true })
    ).pipe(Layer.provide(layerClient("libsql", { intMode })), Layer.orDie),
    { timeout: "2 minutes" }
  )
}
