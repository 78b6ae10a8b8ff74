/**
 * The PostgreSQL store of a target.
 *
 * @internal
 */
import { IdempotencyAdmin, IdempotencyError } from "@effect-idempotency/core"
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InvalidStore } from "../../CliError.js"
import type { MigrateResult, StoreTarget } from "../../StoreTarget.js"
import { StoreSchema } from "../../StoreTarget.js"
import { connectionName, unavailable } from "./shared.js"

/** @internal */
export const layer = (target: Extract<StoreTarget, { readonly _tag: "Postgres" }>) => {
  const options = { table: target.table, schema: target.schema }
  const table = Effect.mapError(
    PgIdempotencyTable.make(options),
    (error) => new InvalidStore({ reason: error.message })
  )
  const client = PgClient.layer({
    url: target.url,
    maxConnections: 2,
    connectTimeout: "5 seconds",
    applicationName: connectionName
  }).pipe(Layer.mapError(unavailable))
  const schema = Layer.effect(
    StoreSchema,
    Effect.gen(function*() {
      const validated = yield* table
      const sql = yield* SqlClient.SqlClient
      const run = (method: string, effect: Effect.Effect<void, SqlError, SqlClient.SqlClient>, detail: string) =>
        effect.pipe(
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.mapError((cause) => new IdempotencyError.StoreError({ method, cause })),
          Effect.as<MigrateResult>({ store: "Postgres", applied: true, created: undefined, detail })
        )
      return {
        migrate: run(
          "migrate",
          PgIdempotencyMigration.migrateTable(validated),
          `the table ${validated.qualified}, its expiry index and ${validated.reserveFunction} are in place`
        ),
        adminIndex: run(
          "adminIndex",
          PgIdempotencyMigration.createAdminIndex(validated),
          `its admin index ${validated.adminIndex} is built`
        )
      }
    })
  )
  const store = Layer.unwrapEffect(
    Effect.map(table, () => PgIdempotencyStore.layerWith(options).pipe(Layer.mapError(unavailable)))
  )
  return Layer.merge(IdempotencyAdmin.layer.pipe(Layer.provideMerge(store)), schema).pipe(Layer.provide(client))
}
