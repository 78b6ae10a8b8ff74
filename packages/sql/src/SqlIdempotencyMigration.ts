/**
 * The table of `SqlIdempotencyStore`, in MariaDB or SQLite (libSQL, Cloudflare D1 and a
 * Durable Object's storage are SQLite): the records table and its index on `expires_at`. Each
 * statement is a no-op when its object exists, so the migration may run on every start, from many
 * instances at once.
 *
 * Run it with your own migrations (`statements` gives the SQL), or let the store's layer run it
 * (`migrate: true`), or call `migrate` on a `SqlClient`. A store on a table that does not exist
 * fails with `NotMigrated`, which says so.
 *
 * | column | MariaDB | SQLite | |
 * | --- | --- | --- | --- |
 * | `id` | `VARCHAR(3000)` ascii, binary collation | `TEXT` | the primary key: operation, scope and key |
 * | `operation`, `scope`, `key` | `TEXT` | `TEXT` | the parts of the id |
 * | `status` | `VARCHAR(16)` | `TEXT` | `IN_PROGRESS`, `COMPLETED` or `FAILED` |
 * | `token`, `fingerprint` | `VARCHAR(255)` | `TEXT` | the fencing token; the payload's fingerprint |
 * | `attempt` | `INT` | `INTEGER` | 1 for a new record, one more at each takeover |
 * | `lease_until`, `expires_at` | `BIGINT` | `INTEGER` | epoch milliseconds; `expires_at` is indexed |
 * | `outcome_kind`, `outcome` | `VARCHAR(16)`, `LONGTEXT` | `TEXT` | the recorded outcome |
 * | `created_at`, `updated_at` | `BIGINT` | `INTEGER` | epoch milliseconds |
 *
 * On MariaDB an id (the encoded operation, the scope and the key) has at most 3,000
 * characters: the longest primary key InnoDB indexes.
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

/** The dialect's former name, `"mysql"`, as `"mariadb"`. */
const canonical = (dialect: Dialect | "mysql"): Dialect => dialect === "mysql" ? "mariadb" : dialect

/**
 * The `SqlClient` is of a database the store does not speak (PostgreSQL has its own store,
 * `@effect-idempotency/sql-pg`; Microsoft SQL Server and ClickHouse have none).
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
 * The `StoreError` of a store whose statement met no table (or, on PostgreSQL, no reservation
 * function): the migration never ran on this database, or ran for another table or schema. Its
 * message says to run it (`effect-idempotency migrate`, or `migrate`) or to build the store's layer
 * with `migrate: true`; its `cause` is the driver's failure. It is a `StoreError` (its `_tag` too), so
 * the store's failures keep their type; `isNotMigrated` tells it apart. The stores of
 * `@effect-idempotency/sql-pg` answer it too.
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
 * Whether a value is a `NotMigrated` store error (from any installed copy of this package).
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
 * The statements that create a table (default `idempotency_records`) and its index in `dialect`,
 * to run with your own migrations.
 *
 * @example
 * ```ts
 * import { SqlIdempotencyMigration } from "@effect-idempotency/sql"
 * import { Either } from "effect"
 *
 * const statements = SqlIdempotencyMigration.statements("sqlite", { table: "idempotency_records" })
 * if (Either.isRight(statements)) console.log(statements.right.join(";\n"))
 * ```
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
 * Creates the table (default `idempotency_records`) and its index on the `SqlClient` of the
 * context, in its dialect, unless they exist.
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
