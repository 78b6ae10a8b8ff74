/**
 * The CLI on PostgreSQL: the server named by `TEST_PG_URL`, else embedded PGlite on a loopback port.
 * And `migrate --admin-index`, which builds the admin index of a table that has records.
 */
import { PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { expectReserved, freshId, reserveRequest } from "../../sql-pg/test/utils/fixtures.js"
import { layerClient, layerPrimary, resetTable, runTable, TestDatabase } from "../../sql-pg/test/utils/TestDatabase.js"
import { cli, Code, parsed } from "./utils/cli.js"
import { CliStore, scenario } from "./utils/scenario.js"

const table = runTable("cli_records")

scenario("effect-idempotency on PostgreSQL", {
  layer: Layer.mergeAll(
    PgIdempotencyStore.layerWith({ table }).pipe(Layer.provide(layerClient())),
    Layer.effect(
      CliStore,
      Effect.map(TestDatabase, (database) => ({ args: ["--store", database.url, "--table", table] }))
    )
  ).pipe(Layer.provide(layerPrimary)),
  migrated: { applied: true }
})

layer(layerClient().pipe(Layer.provideMerge(layerPrimary)), { excludeTestServices: true, timeout: "2 minutes" })(
  "effect-idempotency migrate --admin-index on PostgreSQL",
  (it) => {
    it.effect(
      "builds the admin index of a table that has records, and finds it in place the second time",
      () =>
        Effect.gen(function*() {
          const database = yield* TestDatabase
          const options = { table: runTable("cli_admin_index") }
          const validated = Either.getOrThrow(PgIdempotencyTable.make(options))
          // a table of an earlier version: records, and no admin index
          yield* resetTable(options)
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe(`DROP INDEX ${validated.adminIndex}`)
          const store = yield* PgIdempotencyStore.make(options)
          expectReserved(yield* store.reserve(reserveRequest(freshId("cli-admin-index"))))
          const adminIndex = sql.unsafe<{ readonly valid: boolean }>(
            `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1)`,
            [validated.adminIndex]
          ).withoutTransform
          assert.deepStrictEqual(yield* adminIndex, [])

          for (let i = 0; i < 2; i++) {
            const run = yield* cli([
              "migrate",
              "--admin-index",
              "--json",
              "--store",
              database.url,
              "--table",
              options.table
            ])
            assert.strictEqual(run.code, Code.Ok, run.stderr)
            assert.deepInclude(parsed(run), { store: "Postgres", applied: true })
            assert.include(parsed(run).detail, `admin index ${validated.adminIndex}`)
            assert.deepStrictEqual(yield* adminIndex, [{ valid: true }])
          }
        }),
      60_000
    )
  }
)
