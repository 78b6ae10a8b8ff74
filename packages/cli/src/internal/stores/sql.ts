/**
 * The store of `@effect-idempotency/sql` on the client of a target (MariaDB, SQLite, libSQL).
 *
 * @internal
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyAdmin, IdempotencyError } from "@effect-idempotency/core"
import * as SqlIdempotencyMigration from "@effect-idempotency/sql/SqlIdempotencyMigration"
import * as SqlIdempotencyStore from "@effect-idempotency/sql/SqlIdempotencyStore"
import * as SqlIdempotencyTable from "@effect-idempotency/sql/SqlIdempotencyTable"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { InvalidStore } from "../../CliError.js"
import type { MigrateResult, StoreTarget } from "../../StoreTarget.js"
import { StoreSchema } from "../../StoreTarget.js"
import { unavailable } from "./shared.js"

/**
 * The layers of a SQL target whose table is `table` (`undefined`: the store's default), on the
 * client `client` opens. The table is checked before the client is opened; the message names the
 * rule, never the name given. A client that fails to open, by a failure or by a throw of its
 * driver's constructor, is `StoreUnavailable`, unless `refused` says the target itself is invalid.
 *
 * @internal
 */
export const layer = <E>(
  store: Extract<StoreTarget["_tag"], "MariaDb" | "Sqlite" | "Libsql">,
  table: string | undefined,
  client: Layer.Layer<SqlClient.SqlClient, E>,
  refused?: (cause: unknown) => InvalidStore | undefined
): Layer.Layer<
  IdempotencyAdmin.IdempotencyAdmin | IdempotencyStore.IdempotencyStore | StoreSchema,
  InvalidStore | IdempotencyError.StoreUnavailable | IdempotencyAdmin.AdminUnsupported
> =>
  Either.match(SqlIdempotencyTable.make(table), {
    onLeft: (error) =>
      Layer.fail(new InvalidStore({ reason: `invalid table name (--table, IDEMPOTENCY_TABLE): ${error.reason}` })),
    onRight: (table) => {
      const schema = Layer.effect(
        StoreSchema,
        Effect.map(SqlClient.SqlClient, (sql) => ({
          migrate: SqlIdempotencyMigration.migrate({ table }).pipe(
            Effect.provideService(SqlClient.SqlClient, sql),
            Effect.mapError((cause) => new IdempotencyError.StoreError({ method: "migrate", cause })),
            Effect.as<MigrateResult>({
              store,
              applied: true,
              created: undefined,
              detail: `the table ${table} and its index on expires_at are in place`
            })
          )
        }))
      )
      const opened = client.pipe(
        Layer.catchAllCause((cause): Layer.Layer<unknown, InvalidStore | IdempotencyError.StoreUnavailable> => {
          if (Cause.isInterruptedOnly(cause)) return Layer.failCause(Cause.stripFailures(cause))
          const failure = Cause.squash(cause)
          return Layer.fail(refused?.(failure) ?? unavailable(failure))
        })
      )
      return Layer.merge(
        IdempotencyAdmin.layer.pipe(
          Layer.provideMerge(SqlIdempotencyStore.layerWith({ table }).pipe(Layer.mapError(unavailable)))
        ),
        schema
      ).pipe(Layer.provide(opened))
    }
  })
