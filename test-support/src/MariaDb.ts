/**
 * The MariaDB server of a test run (and of the benchmark), and a database of the run's own on it
 * (`idem_` and 8 random characters, `utf8mb4`), as a scoped Effect that yields a URL naming that
 * database.
 *
 * The server is the one `TEST_MYSQL_URL` names (CI sets it to the machine's server; it must be on
 * loopback, and the database is dropped when the scope closes), else a `mariadbd` started here: a
 * data directory initialised in a fresh temporary directory, the server on a free port of 127.0.0.1
 * where root connects over TCP with no password, stopped and its directory removed when the scope
 * closes. A missing server or binary fails the run; nothing is skipped.
 *
 * @example
 * const url = yield* Effect.map(MariaDb.testDatabase, (database) => database.url)
 * // mysql://root@127.0.0.1:40123/idem_k3v9x0qa
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Mysql from "mysql2"
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, freePort, requireExecutable, spawn, tail } from "./Servers.js"

/** The server of the run could not be had: the message says what to install or to set. */
export class MariaDbError extends Data.TaggedError("MariaDbError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** The database of the run. */
export interface TestDatabase {
  /** `mysql://USER[:PASSWORD]@HOST:PORT/DATABASE`, for `MysqlClient.layer({ url })`. */
  readonly url: string
  /** Its name: `idem_` and 8 random characters. */
  readonly database: string
  /** Whether the server is one this run started (else `TEST_MYSQL_URL`'s). */
  readonly started: boolean
}

/** How long a started `mariadbd` may take to answer, and to stop before it is killed. */
const START_TIMEOUT = Duration.seconds(60)
const STOP_TIMEOUT = Duration.seconds(10)

/** Memory and disk kept small: the tests store a few thousand rows at most. */
const SMALL_SERVER = ["--innodb-buffer-pool-size=32M", "--innodb-log-file-size=4M"]

/** A URL as it may be printed: its password hidden. */
const printable = (url: URL): string => {
  const copy = new URL(url)
  if (copy.password !== "") copy.password = "***"
  return copy.toString()
}

// connections -------------------------------------------------------------------------------------

/** A connection to `uri` (one attempt, bounded by `timeout`), ended when the scope closes. */
const connection = (uri: string, timeout: Duration.Duration): Effect.Effect<Mysql.Connection, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.interruptible(Effect.async<Mysql.Connection, Error>((resume) => {
      const connection = Mysql.createConnection({ uri, connectTimeout: Duration.toMillis(timeout) })
      connection.on("error", () => {})
      connection.connect((error) => resume(error === null ? Effect.succeed(connection) : Effect.fail(error)))
      return Effect.sync(() => connection.destroy())
    })),
    (connection) =>
      Effect.interruptible(Effect.async<void>((resume) => {
        connection.end(() => resume(Effect.void))
        return Effect.sync(() => connection.destroy())
      })).pipe(Effect.timeout("1 second"), Effect.ignore)
  )

/** One statement on a connection. */
const query = (connection: Mysql.Connection, statement: string): Effect.Effect<unknown, Error> =>
  Effect.async((resume) => {
    connection.query(statement, (error, result) => resume(error === null ? Effect.succeed(result) : Effect.fail(error)))
  })

/** The statements, in order, on a connection of their own. */
const run = (uri: string, statements: ReadonlyArray<string>): Effect.Effect<void, Error> =>
  Effect.scoped(
    Effect.flatMap(
      connection(uri, Duration.seconds(3)),
      (connection) => Effect.forEach(statements, (statement) => query(connection, statement), { discard: true })
    )
  )

// binaries ----------------------------------------------------------------------------------------

/**
 * A binary: `$variable` when set (and then only it), else the first of `names` on `PATH`, else in
 * /usr/sbin or /usr/bin (where Debian puts `mariadbd` and `mariadb-install-db`; sbin is often not
 * on a user's `PATH`).
 */
const findBinary = (variable: string, names: ReadonlyArray<string>): Effect.Effect<string, MariaDbError> =>
  requireExecutable(
    names,
    `No MariaDB server for the tests: no ${names.join(" or ")} ($${variable}, PATH, /usr/sbin). ` +
      "Install MariaDB (Debian/Ubuntu: apt-get install mariadb-server; the tests start their own server), " +
      "or set TEST_MYSQL_URL to a server's URL (mysql://root@127.0.0.1:3306/)",
    { variable, after: ["/usr/sbin", "/usr/bin"] }
  ).pipe(Effect.mapError((error) => new MariaDbError({ message: error.message, cause: error })))

/** `mariadbd` and `mariadb-install-db` refuse to run as root unless told to. */
const asRoot: ReadonlyArray<string> = process.getuid?.() === 0 ? ["--user=root"] : []

// a server of the run's own -----------------------------------------------------------------------

/** Initialises a data directory: system tables, root on every loopback address with no password. */
const installDb = (binary: string, dir: string): Effect.Effect<void, MariaDbError> =>
  Effect.async((resume) => {
    const child = execFile(
      binary,
      [
        "--no-defaults",
        ...asRoot,
        `--datadir=${path.join(dir, "data")}`,
        `--tmpdir=${dir}`,
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        "--skip-name-resolve",
        ...SMALL_SERVER
      ],
      { timeout: Duration.toMillis(START_TIMEOUT), maxBuffer: 1 << 20 },
      (error, stdout, stderr) =>
        resume(
          error === null ? Effect.void : Effect.fail(
            new MariaDbError({
              message: `${binary} failed: ${describe(error)}\n${tail([stdout, stderr])}`,
              cause: error
            })
          )
        )
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/**
 * Starts `mariadbd` on a free port of 127.0.0.1, with its data, socket, pid file and temporary
 * files in a fresh directory; yields the port once root connects there. The process is stopped and
 * the directory removed when the scope closes.
 */
const startServer: Effect.Effect<number, MariaDbError, Scope.Scope> = Effect.gen(function*() {
  const mariadbd = yield* findBinary("MARIADBD", ["mariadbd", "mysqld"])
  const installer = yield* findBinary("MARIADB_INSTALL_DB", ["mariadb-install-db", "mysql_install_db"])
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "effect-idempotency-mariadb-"))),
    // retried: an interrupted install leaves its bootstrap `mariadbd` writing here until it sees
    // its input end, a moment after the script was killed
    (dir) =>
      Effect.sync(() => {
        try {
          fs.rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 })
        } catch (error) {
          process.stderr.write(`could not remove ${dir}: ${String(error)}\n`)
        }
      })
  )
  yield* installDb(installer, dir)
  const port = yield* Effect.mapError(freePort, (error) => new MariaDbError({ message: error.message, cause: error }))
  yield* spawn({
    name: mariadbd,
    command: mariadbd,
    args: [
      "--no-defaults",
      ...asRoot,
      `--datadir=${path.join(dir, "data")}`,
      `--socket=${path.join(dir, "mysqld.sock")}`,
      `--pid-file=${path.join(dir, "mysqld.pid")}`,
      `--tmpdir=${dir}`,
      "--bind-address=127.0.0.1",
      `--port=${port}`,
      "--skip-name-resolve",
      "--skip-log-bin",
      "--character-set-server=utf8mb4",
      ...SMALL_SERVER
    ],
    ready: run(`mysql://root@127.0.0.1:${port}/`, ["SELECT 1"]),
    timeout: START_TIMEOUT,
    // a clean InnoDB shutdown takes a second or two
    grace: STOP_TIMEOUT,
    onProcessExit: () => fs.rmSync(dir, { recursive: true, force: true })
  }).pipe(Effect.mapError((error) => new MariaDbError({ message: error.message, cause: error })))
  return port
})

// the run's database ------------------------------------------------------------------------------

/** `idem_` and 8 characters of [a-z0-9]. */
const databaseName = (): string => {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
  return `idem_${Array.from(randomBytes(8), (byte) => alphabet[byte % alphabet.length]).join("")}`
}

const isLoopback = (hostname: string): boolean =>
  hostname === "localhost" || hostname === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)

/** The server `TEST_MYSQL_URL` names, checked: on loopback, and answering within a few seconds. */
const configuredServer = (configured: string): Effect.Effect<URL, MariaDbError> =>
  Effect.gen(function*() {
    const url = yield* Effect.try({
      try: () => new URL(configured),
      catch: (cause) => new MariaDbError({ message: `TEST_MYSQL_URL is not a URL: ${describe(cause)}`, cause })
    })
    if (url.protocol !== "mysql:") {
      return yield* new MariaDbError({
        message: `TEST_MYSQL_URL must be a mysql:// URL (mysql://USER[:PASSWORD]@127.0.0.1:3306/), not ${url.protocol}`
      })
    }
    if (!isLoopback(url.hostname)) {
      return yield* new MariaDbError({
        message: `TEST_MYSQL_URL must name a loopback server (127.0.0.1, localhost or [::1]), not ${url.hostname}`
      })
    }
    // the server itself, whatever database the URL names: the run's own replaces it
    url.pathname = "/"
    yield* run(url.toString(), ["SELECT 1"]).pipe(
      Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error("no answer within 5 seconds") }),
      Effect.mapError((cause) =>
        new MariaDbError({
          message: `TEST_MYSQL_URL=${printable(url)}: could not connect to a MySQL/MariaDB server (${describe(cause)})`,
          cause
        })
      )
    )
    return url
  })

/**
 * The run's database, on `TEST_MYSQL_URL`'s server or on a `mariadbd` started here; see the module
 * doc.
 */
export const testDatabase: Effect.Effect<TestDatabase, MariaDbError, Scope.Scope> = Effect.gen(function*() {
  const configured = process.env.TEST_MYSQL_URL
  const started = configured === undefined || configured === ""
  const server = started
    ? new URL(`mysql://root@127.0.0.1:${yield* startServer}/`)
    : yield* configuredServer(configured)
  const database = databaseName()
  yield* Effect.acquireRelease(
    run(server.toString(), [`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`]).pipe(
      Effect.mapError((cause) =>
        new MariaDbError({
          message: `${printable(server)}: could not create the database ${database} (${describe(cause)})`,
          cause
        })
      )
    ),
    // a started server goes with its directory
    () =>
      started ? Effect.void : run(server.toString(), [`DROP DATABASE IF EXISTS \`${database}\``]).pipe(
        Effect.timeout("10 seconds"),
        Effect.catchAll((cause) =>
          Effect.logWarning(`${printable(server)}: could not drop the database ${database} (${describe(cause)})`)
        )
      )
  )
  const url = new URL(server)
  url.pathname = `/${database}`
  return { url: url.toString(), database, started }
})
