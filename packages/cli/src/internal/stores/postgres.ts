/**
 * The PostgreSQL store of a target.
 *
 * @internal
 */
import { IdempotencyAdmin, IdempotencyError } from "@effect-idempotency/core"
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
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
      return {
        migrate: PgIdempotencyMigration.migrateTable(validated).pipe(
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.mapError((cause) => new IdempotencyError.StoreError({ method: "migrate", cause })),
          Effect.as<MigrateResult>({
            store: "Postgres",
            applied: true,
            created: undefined,
            detail: `the table ${validated.qualified}, its expiry index and ${validated.reserveFunction} are in place`
          })
        )
      }
    })
  )
  const store = Layer.unwrapEffect(
    Effect.map(table, () => PgIdempotencyStore.layerWith(options).pipe(Layer.mapError(unavailable)))
  )
  return Layer.merge(IdempotencyAdmin.layer.pipe(Layer.provideMerge(store)), schema).pipe(Layer.provide(client))
}
