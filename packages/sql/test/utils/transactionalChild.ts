/**
 * A process that runs one transactional operation and stops at a point of its transaction, for the
 * parent to kill it there (`TransactionalKill.test.ts`).
 *
 * Arguments: the engine (`mariadb`, `sqlite`, `libsql`), the database (a URL, or a file), the
 * records table, the orders table, the key, and the point:
 *
 * - `before-reserve`: BEGIN was sent; the reservation is not;
 * - `after-first-statement`: the reservation and the user's first row are written, not the second;
 * - `before-commit`: the outcome is recorded; COMMIT is not sent;
 * - `after-commit`: COMMIT was applied; the answer has not reached the operation;
 * - `none`: runs to the end.
 *
 * At the point it prints `PAUSED <point>` and waits until it is killed. The points in the driver's
 * traffic are found by wrapping the driver (mysql2's connections, better-sqlite3's statements,
 * libSQL's transaction): a test's own instrument, in the test's own process.
 */
import { SqlTransactional } from "@effect-idempotency/sql"
import * as Children from "@effect-idempotency/test-support/Children"
import * as LibsqlClient from "@effect/sql-libsql/LibsqlClient"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Libsql from "@libsql/client"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Mysql from "mysql2"
import * as fs from "node:fs"
import { createRequire } from "node:module"

const [engine, database, table, orders, key, point] = process.argv.slice(2) as [
  "mariadb" | "sqlite" | "libsql",
  string,
  string,
  string,
  string,
  string
]

/** Prints the marker and never resolves. */
const pause = () => Children.pause(point)

/** Prints the marker and blocks the thread: for the synchronous driver. */
const pauseSync = (): never => {
  fs.writeSync(1, `PAUSED ${point}\n`)
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)
  throw new Error("unreachable")
}

const isReserve = (text: string) => text.includes(table) && text.includes("INSERT INTO")
const isCommit = (text: string) => text.trim().toUpperCase() === "COMMIT"

const client = (): Layer.Layer<SqlClient.SqlClient, unknown> => {
  switch (engine) {
    case "mariadb": {
      type Callback = (error: unknown, ...results: Array<unknown>) => void
      for (const method of ["query", "execute"] as const) {
        const original = Mysql.Connection.prototype[method] as (...args: Array<unknown>) => unknown
        Object.assign(Mysql.Connection.prototype, {
          [method](this: Mysql.Connection, ...args: Array<unknown>) {
            const options = args[0] as { readonly sql?: string } | string
            const text = typeof options === "string" ? options : options.sql ?? ""
            const callback = args[args.length - 1]
            if (point === "before-reserve" && isReserve(text)) return void pause()
            if (point === "before-commit" && isCommit(text)) return void pause()
            if (point === "after-commit" && isCommit(text) && typeof callback === "function") {
              return original.apply(this, [...args.slice(0, -1), () => void pause()])
            }
            return original.apply(this, args as Array<unknown> & [Callback])
          }
        })
      }
      return MysqlClient.layer({ url: Redacted.make(database), maxConnections: 2 })
    }
    case "sqlite": {
      // the driver under @effect/sql-sqlite-node (no type declarations here): its statements' prototype
      const Database = createRequire(import.meta.url)("better-sqlite3") as new(filename: string) => {
        prepare(sql: string): object
        close(): void
      }
      const probe = new Database(":memory:")
      const prototype = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<string, unknown>
      probe.close()
      for (const method of ["run", "all"] as const) {
        const original = prototype[method] as (...args: Array<unknown>) => unknown
        prototype[method] = function(this: { readonly source: string }, ...args: Array<unknown>) {
          if (point === "before-reserve" && isReserve(this.source)) pauseSync()
          if (point === "before-commit" && isCommit(this.source)) pauseSync()
          const result = original.apply(this, args)
          if (point === "after-commit" && isCommit(this.source)) pauseSync()
          return result
        }
      }
      return SqliteClient.layer({ filename: database })
    }
    case "libsql": {
      const sdk = Libsql.createClient({ url: `file:${database}`, intMode: "number" })
      const wrapped = new Proxy(sdk, {
        get(target, property, receiver) {
          if (property !== "transaction") return Reflect.get(target, property, receiver)
          return async (mode: Libsql.TransactionMode) => {
            const tx = await target.transaction(mode)
            return new Proxy(tx, {
              get(target, property, receiver) {
                if (property === "execute") {
                  return (statement: Libsql.InStatement) => {
                    const text = typeof statement === "string" ? statement : statement.sql
                    return point === "before-reserve" && isReserve(text) ? pause() : target.execute(statement)
                  }
                }
                if (property === "commit") {
                  return async () => {
                    if (point === "before-commit") return pause()
                    await target.commit()
                    if (point === "after-commit") return pause()
                  }
                }
                return Reflect.get(target, property, receiver)
              }
            })
          }
        }
      })
      return LibsqlClient.layer({ liveClient: wrapped })
    }
  }
}

const order = SqlTransactional.make({
  ...Children.killOrder(orders, key, {
    between: point === "after-first-statement" ? Effect.promise(pause) : Effect.void
  }),
  table
})

Children.runMain(
  order.run({ key, payload: Children.killPayload, timeout: "30 seconds" }).pipe(Effect.provide(client()))
)
