/**
 * The records table and its reservation function: one migration, runnable through `@effect/sql`'s
 * Migrator or as plain SQL.
 *
 * With the Migrator, keep the store's migrations in a migrations table of their own, so their ids
 * never collide with the application's:
 *
 * Or run `migration(options)` from one of the application's own migrations, or apply `toSql()`
 * with any other tool. Every statement is idempotent (`IF NOT EXISTS`, `CREATE OR REPLACE`).
 *
 * The table:
 *
 * | column | type | |
 * | --- | --- | --- |
 * | `id` | `text` primary key | the scoped record id (`RecordId.value`) |
 * | `operation`, `scope`, `key` | `text` (`scope` nullable) | the parts of the id, for operators |
 * | `status` | `text` | `IN_PROGRESS`, `COMPLETED` or `FAILED` |
 * | `token` | `text` | the fencing token of the current owner |
 * | `fingerprint` | `text` | the request fingerprint |
 * | `attempt` | `integer` | 1, plus one per takeover |
 * | `lease_until`, `expires_at` | `bigint` | epoch milliseconds; `expires_at` is indexed for the purge |
 * | `outcome_kind`, `outcome` | `text` | the recorded outcome of a COMPLETED record |
 * | `created_at`, `updated_at` | `bigint` | epoch milliseconds |
 *
 * Next to the table, in the same schema, the migration creates the PL/pgSQL function
 * `<table>_reserve`, which the store calls to reserve a record: it must exist before the store is
 * used.
 *
 * @example
 * ```ts
 * import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
 * import { PgMigrator } from "@effect/sql-pg"
 *
 * const migrate = PgMigrator.run({
 *   loader: PgIdempotencyMigration.loader(),
 *   table: "effect_idempotency_migrations"
 * })
 * ```
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as internal from "./internal/statements.js"
import * as PgIdempotencyTable from "./PgIdempotencyTable.js"

/**
 * The name of the migration in `migrations` and `loader`.
 *
 * @since 0.1.0
 * @category constants
 */
export const MIGRATION_NAME = "1_create_idempotency_records"

/**
 * The statements that create a table, its expiry index and its reservation function, in order,
 * one string per statement (the function's body is dollar-quoted and contains semicolons).
 *
 * @since 0.1.0
 * @category sql
 */
export const statements = (
  table: PgIdempotencyTable.IdempotencyTable = PgIdempotencyTable.defaultTable
): ReadonlyArray<string> => internal.migration(table)

/**
 * The migration as one SQL script, for teams that manage their own migrations.
 *
 * @example
 * ```ts
 * import { PgIdempotencyMigration, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
 * import { Either } from "effect"
 *
 * const script = PgIdempotencyMigration.toSql(
 *   Either.getOrThrow(PgIdempotencyTable.make({ table: "payments_idempotency", schema: "billing" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category sql
 */
export const toSql = (table: PgIdempotencyTable.IdempotencyTable = PgIdempotencyTable.defaultTable): string =>
  statements(table).map((statement) => `${statement};\n`).join("\n")

/**
 * The migration as an effect: creates the table, its index and its reservation function in one
 * transaction (a savepoint inside the Migrator's transaction).
 *
 * @since 0.1.0
 * @category migrations
 */
export const migration = (
  options?: PgIdempotencyTable.TableOptions
): Effect.Effect<void, SqlError | PgIdempotencyTable.InvalidTableName, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const table = yield* PgIdempotencyTable.make(options)
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(
      Effect.forEach(statements(table), (statement) => sql.unsafe(statement).withoutTransform, { discard: true })
    )
  })

/**
 * The migrations for `Migrator.fromRecord`.
 *
 * @since 0.1.0
 * @category migrations
 */
export const migrations = (
  options?: PgIdempotencyTable.TableOptions
): Record<string, Effect.Effect<void, SqlError | PgIdempotencyTable.InvalidTableName, SqlClient.SqlClient>> => ({
  [MIGRATION_NAME]: migration(options)
})

/**
 * A Migrator loader of the migrations.
 *
 * @since 0.1.0
 * @category migrations
 */
export const loader = (options?: PgIdempotencyTable.TableOptions): Migrator.Loader =>
  Migrator.fromRecord(migrations(options))
