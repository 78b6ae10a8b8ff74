/**
 * The engines the store's tests run on: the run's MariaDB server (see `globalSetup.ts`), SQLite
 * through `better-sqlite3`, and libSQL, both on a database file of their own.
 */
import * as LibsqlClient from "@effect/sql-libsql/LibsqlClient"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { inject } from "vitest"

/** @internal */
export type Engine = "mariadb" | "sqlite" | "libsql"

/** @internal */
export const engines: ReadonlyArray<Engine> = ["mariadb", "sqlite", "libsql"]

/** A table name of this run's own. */
export const uniqueTable = (name: string): string => `${name}_${Math.random().toString(36).slice(2, 10)}`

/** A directory of its own, removed with the scope. */
const scopedDirectory = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "effect-idempotency-sql-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** A fresh database file in a directory of its own. */
const scopedFile = Effect.map(scopedDirectory, (dir) => path.join(dir, "records.db"))

/**
 * A client of `engine`: a pool of `maxConnections` on the run's MariaDB database, or a new SQLite
 * or libSQL database file (one connection, as those clients have).
 */
export const layerClient = (
  engine: Engine,
  options?: {
    readonly maxConnections?: number
    readonly file?: string
    /** libSQL: how integers come back (default numbers). */
    readonly intMode?: "number" | "bigint" | "string"
  }
): Layer.Layer<SqlClient.SqlClient> => {
  switch (engine) {
    case "mariadb":
      return MysqlClient.layer({
        url: Redacted.make(inject("mysqlUrl")),
        maxConnections: options?.maxConnections ?? 10
      }).pipe(Layer.orDie)
    case "sqlite":
      return Layer.unwrapScoped(
        Effect.map(
          options?.file === undefined ? scopedFile : Effect.succeed(options.file),
          (filename) => SqliteClient.layer({ filename })
        )
      ).pipe(Layer.orDie)
    case "libsql":
      return Layer.unwrapScoped(
        Effect.map(
          options?.file === undefined ? scopedFile : Effect.succeed(options.file),
          (filename) => LibsqlClient.layer({ url: `file:${filename}`, intMode: options?.intMode ?? "number" })
        )
      )
  }
}

/** A new database file, for clients that must share one (two processes, two clients). */
export const scopedDatabaseFile = scopedFile

/**
 * Moves the database's clock forward for one table: every timestamp of the table moves back.
 */
export const shiftBack = (table: string, engine: Engine, millis: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const t = engine === "mariadb" ? `\`${table}\`` : `"${table}"`
    return sql.unsafe(`UPDATE ${t} SET lease_until = lease_until - ?, expires_at = expires_at - ?`, [millis, millis])
      .withoutTransform
  }).pipe(Effect.orDie, Effect.asVoid)

/** The transactional tests' table of the user's rows: an order row of a key. */
export const createOrders = (engine: Engine, orders: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.unsafe(
      `CREATE TABLE ${orders} (id VARCHAR(64) PRIMARY KEY, ${
        engine === "mariadb" ? "`key`" : "\"key\""
      } VARCHAR(64) NOT NULL, sku VARCHAR(64) NOT NULL, quantity INT)`
    ))

/** The transactional tests' count of a key: its rows in `orders` and its records in `records`. */
export const transactionalCounts = (engine: Engine, orders: string, records: string) => (key: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyColumn = engine === "mariadb" ? "`key`" : "\"key\""
    const rows = yield* sql.unsafe<{ readonly n: number }>(
      `SELECT COUNT(*) AS n FROM ${orders} WHERE ${keyColumn} = ?`,
      [key]
    )
    const found = yield* sql.unsafe<{ readonly n: number; readonly status: string | null }>(
      `SELECT COUNT(*) AS n, MAX(status) AS status FROM ${records} WHERE ${keyColumn} = ?`,
      [key]
    )
    return { orders: Number(rows[0]!.n), records: Number(found[0]!.n), status: found[0]!.status }
  }).pipe(Effect.orDie)
