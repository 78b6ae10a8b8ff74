/**
 * The migration of the records table, its indexes and its reservation function: see the README.
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
 * The `StoreError` of a missing table or reservation function (`SqlIdempotencyMigration.NotMigrated`).
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
 * Whether a value is a `NotMigrated` store error, from any installed copy of the package.
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
 * The migration's statements for a table (default `idempotency_records`), one string per statement.
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
 * @throws `InvalidTableName` when the options name an invalid table or schema.
 * @since 0.1.0
 * @category sql
 */
export const toSql = (table?: PgIdempotencyTable.IdempotencyTable | PgIdempotencyTable.TableOptions): string =>
  statements(table).map((statement) => `${statement};\n`).join("\n")

/**
 * Runs the migration of a validated table in one transaction, under an advisory lock of the table.
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
        sql.unsafe("SELECT pg_advisory_xact_lock(hashtext($1))", [
          `@effect-idempotency/sql-pg migration ${table.qualified}`
        ]).withoutTransform,
        Effect.forEach(statements(table), (statement) => sql.unsafe(statement).withoutTransform, { discard: true })
      )
    ))

/**
 * The migration as an effect, for a Migrator or the application's own migrations.
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
 * Builds the admin index of a validated table `CONCURRENTLY`, outside any transaction (see the README).
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
 *
 * @since 0.1.0
 * @category migrations
 */
export const adminIndex = (
  options?: PgIdempotencyTable.TableOptions
): Effect.Effect<void, SqlError | PgIdempotencyTable.InvalidTableName, SqlClient.SqlClient> =>
  Effect.flatMap(PgIdempotencyTable.make(options), createAdminIndex)
