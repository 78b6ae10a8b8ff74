/**
 * The records table and its reservation function: one migration, runnable through `@effect/sql`'s
 * Migrator or as plain SQL.
 *
 * With the Migrator, keep the store's migrations in a migrations table of their own, so their ids
 * never collide with the application's:
 *
 * Or let the store's layer run it when it is built (`PgIdempotencyStore.layerWith({ migrate: true })`),
 * run `migration(options)` from one of the application's own migrations, or apply `toSql()` with
 * any other tool. Every statement is idempotent (`IF NOT EXISTS`, `CREATE OR REPLACE`), and the
 * effects run them in one transaction under an advisory lock of the table, so instances that start
 * at once do not race on the catalog.
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
import * as Either from "effect/Either"
import * as internal from "./internal/statements.js"
import * as PgIdempotencyTable from "./PgIdempotencyTable.js"

/**
 * The name of the migration in `migrations` and `loader`.
 *
 * @since 0.1.0
 * @category constants
 */
export const MIGRATION_NAME = "1_create_idempotency_records"

const isTable = (
  table: PgIdempotencyTable.IdempotencyTable | PgIdempotencyTable.TableOptions
): table is PgIdempotencyTable.IdempotencyTable =>
  typeof (table as Partial<PgIdempotencyTable.IdempotencyTable>).qualified === "string"

const resolve = (
  table: PgIdempotencyTable.IdempotencyTable | PgIdempotencyTable.TableOptions | undefined
): PgIdempotencyTable.IdempotencyTable =>
  table === undefined
    ? PgIdempotencyTable.defaultTable
    : isTable(table)
    ? table
    : Either.getOrThrowWith(PgIdempotencyTable.make(table), (error) => error)

/**
 * The statements that create a table, its expiry index and its reservation function, in order,
 * one string per statement (the function's body is dollar-quoted and contains semicolons).
 *
 * Takes a validated table, or table options (`{ table, schema }`, validated here); with neither,
 * the default table `idempotency_records`.
 *
 * @throws `InvalidTableName` when the options name an invalid table or schema.
 * @since 0.1.0
 * @category sql
 */
export const statements = (
  table?: PgIdempotencyTable.IdempotencyTable | PgIdempotencyTable.TableOptions
): ReadonlyArray<string> => internal.migration(resolve(table))

/**
 * The migration as one SQL script, for teams that manage their own migrations.
 *
 * Takes a validated table, or table options (`{ table, schema }`, validated here); with neither,
 * the default table `idempotency_records`.
 *
 * @example
 * ```ts
 * import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
 *
 * // the default table, "idempotency_records"
 * const script = PgIdempotencyMigration.toSql()
 * // a table of your own
 * const billing = PgIdempotencyMigration.toSql({ table: "payments_idempotency", schema: "billing" })
 * ```
 *
 * @throws `InvalidTableName` when the options name an invalid table or schema.
 * @since 0.1.0
 * @category sql
 */
export const toSql = (table?: PgIdempotencyTable.IdempotencyTable | PgIdempotencyTable.TableOptions): string =>
  statements(table).map((statement) => `${statement};\n`).join("\n")

/**
 * Runs the migration of a validated table: one transaction (a savepoint inside a caller's
 * transaction) that first takes a transaction-level advisory lock derived from the table's
 * qualified name, so concurrent runs (instances starting at once) apply it one after the other.
 *
 * @since 0.1.0
 * @category migrations
 */
export const migrateTable = (
  table: PgIdempotencyTable.IdempotencyTable
): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(
      Effect.zipRight(
        // $1: a name only this table's migration locks on
        sql.unsafe("SELECT pg_advisory_xact_lock(hashtext($1))", [
          `@effect-idempotency/sql-pg migration ${table.qualified}`
        ]).withoutTransform,
        Effect.forEach(statements(table), (statement) => sql.unsafe(statement).withoutTransform, { discard: true })
      )
    ))

/**
 * The migration as an effect: creates the table, its index and its reservation function in one
 * transaction (a savepoint inside the Migrator's transaction), under an advisory lock of the table.
 *
 * @since 0.1.0
 * @category migrations
 */
export const migration = (
  options?: PgIdempotencyTable.TableOptions
): Effect.Effect<void, SqlError | PgIdempotencyTable.InvalidTableName, SqlClient.SqlClient> =>
  Effect.flatMap(PgIdempotencyTable.make(options), migrateTable)

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
