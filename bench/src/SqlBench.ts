/**
 * `@effect-idempotency/sql`: the `SqlIdempotencyStore` (through the `Idempotency` combinator) on
 * MariaDB (`@effect/sql-mysql2`), SQLite (`@effect/sql-sqlite-node`, better-sqlite3, a temporary
 * file) and libSQL (`@effect/sql-libsql`, a temporary `file:` database), each against a raw
 * baseline on the same `SqlClient`: one INSERT and one UPDATE per first execution, one SELECT by
 * primary key per replay or conflict (the floor of each path), sent with `sql.unsafe` and nothing
 * else. Round trips are the statements sent through the client (its `unsafe`, counted by a proxy).
 *
 * MariaDB is the server of `--mysql-url` (or `TEST_MYSQL_URL`) with a database of the run's own
 * (`idem_…`, dropped at the end), else a `mariadbd` started for the run in a temporary directory
 * (stopped and removed at the end): the tests' helper, `MariaDb.testDatabase` of `test-support`.
 */
import { SqlIdempotencyMigration, SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as Counting from "@effect-idempotency/test-support/Counting"
import * as MariaDb from "@effect-idempotency/test-support/MariaDb"
import * as LibsqlClient from "@effect/sql-libsql/LibsqlClient"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { FINGERPRINT, LEASE_MILLIS, rawSqlClient, TTL_MILLIS } from "./Baseline.js"
import { BenchError } from "./Measure.js"
import type { Plan, SuiteResult } from "./Suite.js"
import * as Suite from "./Suite.js"

export const STORE = "sql-store"
export const RAW = "raw-sqlclient"

export type Engine = "mariadb" | "sqlite" | "libsql"

export const ENGINES: ReadonlyArray<Engine> = ["mariadb", "sqlite", "libsql"]

/** The connections of the MariaDB pool (SQLite and libSQL clients have one connection). */
export const MARIADB_POOL = 16

/** Where one engine ran. */
export interface Database {
  readonly engine: Engine
  /** MariaDB: the server of the URL, or one the run started; SQLite and libSQL: a temporary file. */
  readonly kind: "server" | "started" | "file"
  readonly version: string
  /** SQLite and libSQL: the database file's `journal_mode` (the client's default). */
  readonly journalMode: string | undefined
}

export interface EngineRun {
  readonly database: Database
  readonly result: SuiteResult
}

/** A directory of the run's own, removed with the scope. */
const scopedDirectory = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "effect-idempotency-bench-sql-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/**
 * `TEST_MYSQL_URL` set to `url` (empty: the helper starts a `mariadbd`) while the scope is open,
 * since the tests' helper reads its server from there; restored when the scope closes.
 */
const mysqlUrlInEnvironment = (url: string | undefined) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const before = process.env.TEST_MYSQL_URL
      process.env.TEST_MYSQL_URL = url ?? ""
      return before
    }),
    (before) =>
      Effect.sync(() => {
        if (before === undefined) delete process.env.TEST_MYSQL_URL
        else process.env.TEST_MYSQL_URL = before
      })
  )

/** The client of `engine` (built in the scope), where it runs, and its version query. */
export const client = (
  engine: Engine,
  mysqlUrl: string | undefined
): Effect.Effect<
  { readonly sql: SqlClient.SqlClient; readonly kind: Database["kind"]; readonly versionQuery: string },
  BenchError,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const build = <E>(layer: Layer.Layer<SqlClient.SqlClient, E>) =>
      Effect.map(
        Effect.mapError(Layer.build(layer), (cause) => new BenchError({ message: `no ${engine} client`, cause })),
        Context.get(SqlClient.SqlClient)
      )
    switch (engine) {
      case "mariadb": {
        yield* mysqlUrlInEnvironment(mysqlUrl)
        const database = yield* Effect.mapError(MariaDb.testDatabase, (cause) =>
          new BenchError({
            message: `no MariaDB: ${cause.message} (give --mysql-url, or TEST_MYSQL_URL, or install mariadb-server)`,
            cause
          }))
        const sql = yield* build(MysqlClient.layer({ url: Redacted.make(database.url), maxConnections: MARIADB_POOL }))
        return { sql, kind: database.started ? "started" : "server", versionQuery: "SELECT VERSION() AS version" }
      }
      case "sqlite": {
        const dir = yield* scopedDirectory
        const sql = yield* build(SqliteClient.layer({ filename: path.join(dir, "records.db") }))
        return { sql, kind: "file", versionQuery: "SELECT sqlite_version() AS version" }
      }
      case "libsql": {
        const dir = yield* scopedDirectory
        const sql = yield* build(LibsqlClient.layer({ url: `file:${path.join(dir, "records.db")}` }))
        return { sql, kind: "file", versionQuery: "SELECT sqlite_version() AS version" }
      }
    }
  })

/** Statements of the raw baseline on its own table (made by the store's migration). */
const rawStatements = (engine: Engine, table: string) => {
  const quote = engine === "mariadb" ? (s: string) => `\`${s}\`` : (s: string) => `"${s}"`
  const t = quote(table)
  return {
    insert: `INSERT INTO ${t} (id, operation, scope, ${quote("key")}, status, token, fingerprint, attempt, ` +
      "lease_until, expires_at, created_at, updated_at) VALUES (?, 'charge', NULL, ?, 'IN_PROGRESS', ?, ?, 1, ?, ?, ?, ?)",
    update: `UPDATE ${t} SET status = 'COMPLETED', outcome_kind = 'Success', outcome = ?, expires_at = ?, ` +
      "updated_at = ? WHERE id = ?",
    select: `SELECT status, fingerprint, outcome_kind, outcome, expires_at FROM ${t} WHERE id = ?`
  }
}

const insertParams = (key: string) => {
  const now = Date.now()
  return [`charge#${key}`, key, randomUUID(), FINGERPRINT, now + LEASE_MILLIS, now + TTL_MILLIS, now, now]
}

/** The suite on one engine: the store and its raw floor, each on a table of its own, on one client. */
export const run = (
  engine: Engine,
  mysqlUrl: string | undefined,
  plan: Plan
): Effect.Effect<EngineRun, BenchError> =>
  Effect.scoped(Effect.gen(function*() {
    const { kind, sql: plain, versionQuery } = yield* client(engine, mysqlUrl)
    const sent = { statements: 0 }
    // `unsafe` counts the statements it is asked for, as the store's round-trip tests count
    const sql = Counting.sql(plain, sent)
    const fail = (what: string) => (cause: unknown) => new BenchError({ message: `${engine}: ${what}`, cause })
    const versionRows = yield* Effect.mapError(
      plain.unsafe<{ readonly version: unknown }>(versionQuery).withoutTransform,
      fail("the version query failed")
    )
    const version = String(versionRows[0]?.version ?? "unknown")
    const journalMode = engine === "mariadb" ? undefined : yield* Effect.mapError(
      Effect.map(
        plain.unsafe<{ readonly journal_mode: unknown }>("PRAGMA journal_mode").withoutTransform,
        (rows) => String(rows[0]?.journal_mode ?? "unknown")
      ),
      fail("PRAGMA journal_mode failed")
    )
    const sqlLayer = Layer.succeed(SqlClient.SqlClient, sql)
    const suffix = plan.runId.replaceAll("-", "_")
    const tables = { store: `bench_store_${suffix}`, raw: `bench_raw_${suffix}` }
    yield* Effect.mapError(
      Effect.provideService(SqlIdempotencyMigration.migrate({ table: tables.raw }), SqlClient.SqlClient, plain),
      fail("the migration failed")
    )
    // the MariaDB database goes with the run (dropped, or its server removed); the SQLite files too
    const roundTrips = () => sent.statements

    const store = yield* Suite.effectContender(
      STORE,
      SqlIdempotencyStore.layerWith({ table: tables.store, migrate: true }).pipe(Layer.provide(sqlLayer)),
      roundTrips
    )

    const rawContender = rawSqlClient({
      name: RAW,
      runtime: yield* Suite.scopedRuntime(sqlLayer),
      statements: rawStatements(engine, tables.raw),
      insertParams,
      updateParams: (key, outcome) => {
        const now = Date.now()
        return [outcome, now + TTL_MILLIS, now, `charge#${key}`]
      },
      roundTrips
    })

    const result = yield* Suite.run(plan, [store, rawContender])
    return { database: { engine, kind, version, journalMode }, result }
  }))
