/**
 * The migration of `SqlIdempotencyStore`'s table and its index (see the package's README, "The migration").
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as errors from "./internal/errors.js"
import * as Statements from "./internal/statements.js"
import * as SqlIdempotencyTable from "./SqlIdempotencyTable.js"

/**
 * The databases the store speaks: MariaDB (`"mariadb"`), SQLite and libSQL (`"sqlite"`).
 *
 * @since 0.1.0
 * @category models
 */
export type Dialect = Statements.Dialect

const canonical = (dialect: Dialect | "mysql"): Dialect => dialect === "mysql" ? "mariadb" : dialect

/**
 * The `SqlClient` is of a database the store does not speak.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnsupportedDialect extends Schema.TaggedError<UnsupportedDialect>(
  "@effect-idempotency/sql/UnsupportedDialect"
)("UnsupportedDialect", { dialect: Schema.String }) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.dialect === "pg"
      ? "SqlIdempotencyStore speaks MariaDB and SQLite; for PostgreSQL use @effect-idempotency/sql-pg"
      : `SqlIdempotencyStore speaks MariaDB and SQLite, not ${this.dialect}`
  }
}

/**
 * The `StoreError` of a statement that met no table: its message says how to migrate.
 *
 * @since 0.1.0
 * @category errors
 */
export const NotMigrated: typeof errors.NotMigrated = errors.NotMigrated

/**
 * @since 0.1.0
 * @category errors
 */
export type NotMigrated = errors.NotMigrated

/**
 * Whether a value is a `NotMigrated` store error, from any installed copy of this package.
 *
 * @since 0.1.0
 * @category errors
 */
export const isNotMigrated: (u: unknown) => u is NotMigrated = errors.isNotMigrated

/**
 * The dialect of the `SqlClient` of the context.
 *
 * @since 0.1.0
 * @category utils
 */
export const dialect: Effect.Effect<Dialect, UnsupportedDialect, SqlClient.SqlClient> = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) =>
    sql.onDialectOrElse({
      // @effect/sql's name for the MySQL protocol, which MariaDB speaks
      mysql: () => Effect.succeed<Dialect>("mariadb"),
      sqlite: () => Effect.succeed<Dialect>("sqlite"),
      pg: () => Effect.fail(new UnsupportedDialect({ dialect: "pg" })),
      mssql: () => Effect.fail(new UnsupportedDialect({ dialect: "mssql" })),
      clickhouse: () => Effect.fail(new UnsupportedDialect({ dialect: "clickhouse" })),
      orElse: () => Effect.fail(new UnsupportedDialect({ dialect: "unknown" }))
    })
)

/**
 * The statements that create a table (default `idempotency_records`) and its index.
 *
 * @since 0.1.0
 * @category migration
 */
export const statements: {
  (
    dialect: Dialect,
    options?: { readonly table?: string | undefined }
  ): Either.Either<ReadonlyArray<string>, SqlIdempotencyTable.InvalidTableName>
  /** @deprecated `"mysql"` is `"mariadb"` (the dialect runs on MariaDB only); removed at 1.0. */
  (
    dialect: "mysql",
    options?: { readonly table?: string | undefined }
  ): Either.Either<ReadonlyArray<string>, SqlIdempotencyTable.InvalidTableName>
} = (dialect: Dialect | "mysql", options?: { readonly table?: string | undefined }) =>
  Either.map(SqlIdempotencyTable.make(options?.table), (table) => Statements.migration(canonical(dialect), table))

/**
 * Runs the migration of a validated table on the `SqlClient` of the context.
 *
 * @since 0.1.0
 * @category migration
 */
export const migrateTable: {
  (dialect: Dialect, table: string): Effect.Effect<void, SqlError, SqlClient.SqlClient>
  /** @deprecated `"mysql"` is `"mariadb"` (the dialect runs on MariaDB only); removed at 1.0. */
  (dialect: "mysql", table: string): Effect.Effect<void, SqlError, SqlClient.SqlClient>
} = (dialect: Dialect | "mysql", table: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      Effect.forEach(
        Statements.migration(canonical(dialect), table),
        (statement) => sql.unsafe(statement).withoutTransform,
        { discard: true }
      )
  )

/**
 * Creates the table (default `idempotency_records`) and its index on the context's client.
 *
 * @since 0.1.0
 * @category migration
 */
export const migrate = (
  options?: { readonly table?: string | undefined }
): Effect.Effect<
  void,
  SqlIdempotencyTable.InvalidTableName | UnsupportedDialect | SqlError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const table = yield* SqlIdempotencyTable.make(options?.table)
    yield* migrateTable(yield* dialect, table)
  })
