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
 * | `id` | `text` primary key | the scoped record id (`RecordId.value`); in the admin index too, for the records in progress, failed, unknown or omitted |
 * | `operation`, `scope`, `key` | `text` (`scope` nullable) | the parts of the id, for operators |
 * | `status` | `text` | `IN_PROGRESS`, `COMPLETED` or `FAILED` |
 * | `token` | `text` | the fencing token of the current owner |
 * | `fingerprint` | `text` | the request fingerprint |
 * | `attempt` | `integer` | 1, plus one per takeover |
 * | `lease_until`, `expires_at` | `bigint` | epoch milliseconds; `expires_at` is indexed for the purge |
 * | `outcome_kind`, `outcome` | `text` | the recorded outcome of a COMPLETED record |
 * | `created_at`, `updated_at` | `bigint` | epoch milliseconds |
 *
 * Its indexes: the primary key on `id`; `<table>_expires_at_idx` on `expires_at`, for the purge;
 * and `<table>_admin_idx`, a partial index on `id` of the records in progress, failed, unknown or
 * omitted, for `IdempotencyAdmin.list` by state. The migration creates the admin index on a table
 * without records (a new one: at once); on a table that has records, `adminIndex` builds it without
 * blocking writes.
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
import * as SqlIdempotencyMigration from "@effect-idempotency/sql/SqlIdempotencyMigration"
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

/**
 * The `StoreError` of a store whose table or reservation function does not exist (SQLSTATE `42P01`
 * or `42883`): the migration never ran on this database, or ran for another table or schema. Its
 * message says to run it (`effect-idempotency migrate`, or `migrate`) or to build the store's layer
 * with `migrate: true`; its `cause` is the driver's failure. The same class as
 * `@effect-idempotency/sql`'s `SqlIdempotencyMigration.NotMigrated`.
 *
 * @since 0.1.0
 * @category errors
 */
export const NotMigrated: typeof SqlIdempotencyMigration.NotMigrated = SqlIdempotencyMigration.NotMigrated

/**
 * @since 0.1.0
 * @category errors
 */
export type NotMigrated = SqlIdempotencyMigration.NotMigrated

/**
 * Whether a value is a `NotMigrated` store error (from any installed copy of the package).
 *
 * @since 0.1.0
 * @category errors
 */
export const isNotMigrated: (u: unknown) => u is NotMigrated = SqlIdempotencyMigration.isNotMigrated

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
 * The statements that create a table, its expiry index, its admin index (when the table has no
 * records) and its reservation function, in order, one string per statement (the bodies of the
 * function and of the admin index's `DO` block are dollar-quoted and contain semicolons).
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
 * The migration as an effect: creates the table, its indexes and its reservation function in one
 * transaction (a savepoint inside the Migrator's transaction), under an advisory lock of the table.
 * The admin index is created only on a table without records: see `adminIndex`.
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

/**
 * Builds the admin index of a validated table (`<table>_admin_idx`, the partial index on `id` that
 * `IdempotencyAdmin.list` uses to find the records in progress, failed, unknown or omitted) with
 * `CREATE INDEX CONCURRENTLY IF NOT EXISTS`: reads and writes of the table go on while it builds.
 * An index of that name that a failed or cancelled build left invalid is built again
 * (`REINDEX INDEX CONCURRENTLY`, PostgreSQL 12 or later).
 *
 * It must run outside any transaction (not in a Migrator's migration, not in `withTransaction`),
 * and it waits for the transactions open on the table when it starts. Running it again, or on a
 * table the migration gave the index, does nothing.
 *
 * @since 0.1.0
 * @category migrations
 */
export const createAdminIndex = (
  table: PgIdempotencyTable.IdempotencyTable
): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const index = internal.adminIndex(table)
    return Effect.gen(function*() {
      yield* sql.unsafe(index.create).withoutTransform
      const rows = yield* sql.unsafe<{ readonly valid: boolean }>(index.valid, [index.name]).withoutTransform
      if (rows[0]?.valid === false) yield* sql.unsafe(index.rebuild).withoutTransform
    })
  })

/**
 * The admin index of an existing table, built without blocking its writes: see `createAdminIndex`.
 * A table created by the migration while it had no records has it already.
 *
 * @example
 * ```ts
 * import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
 *
 * // once, from a deploy step (outside any transaction)
 * const indexed = PgIdempotencyMigration.adminIndex({ table: "idempotency_records" })
 * ```
 *
 * @since 0.1.0
 * @category migrations
 */
export const adminIndex = (
  options?: PgIdempotencyTable.TableOptions
): Effect.Effect<void, SqlError | PgIdempotencyTable.InvalidTableName, SqlClient.SqlClient> =>
  Effect.flatMap(PgIdempotencyTable.make(options), createAdminIndex)
