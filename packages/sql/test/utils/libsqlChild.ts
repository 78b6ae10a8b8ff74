/**
 * A process on a libSQL file (`LibsqlFile.test.ts`), in one of two roles:
 *
 * - `hold <file> <millis>`: takes the file's write lock (a write transaction) as soon as it starts,
 *   prints `held`, keeps it `millis`, commits and exits: another process that writes meanwhile meets
 *   `SQLITE_BUSY`;
 * - `run <file> <table> <keys> <log>`: prints `ready`, waits for a line on stdin, then runs an
 *   operation over `key-0` … `key-(keys-1)` in order,
 *   through `SqlIdempotencyStore` on `@effect/sql-libsql`, its downstream appending the key to the
 *   file `log` (every execution, whatever process ran it). It prints one JSON line: the keys answered
 *   as recorded, and how many calls failed.
 */
import { Idempotency, IdempotencyContext } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as LibsqlClient from "@effect/sql-libsql/LibsqlClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { once } from "node:events"
import * as fs from "node:fs"

const [role, file] = process.argv.slice(2) as [string, string]

const hold = (millis: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql.unsafe("CREATE TABLE IF NOT EXISTS held (at INTEGER)")
      yield* sql.unsafe("INSERT INTO held VALUES (?)", [Date.now()])
      process.stdout.write("held\n")
      yield* Effect.sleep(millis)
    }))
  }).pipe(Effect.provide(LibsqlClient.layer({ url: `file:${file}` })))

const run = (table: string, keys: number, log: string) => {
  const operation = Idempotency.make({
    name: "libsql-file",
    payload: Schema.Null,
    success: Schema.String,
    // a key whose outcome could not be recorded stays blocked: no other process runs it again
    onTimeout: "markUnknown",
    execute: () =>
      Effect.flatMap(IdempotencyContext.IdempotencyContext, (context) =>
        Effect.sync(() => {
          fs.appendFileSync(log, `${context.key}\n`)
          return context.key
        }))
  })
  return Effect.gen(function*() {
    process.stdout.write("ready\n")
    yield* Effect.promise(() => once(process.stdin, "data"))
    const recorded: Array<string> = []
    let failed = 0
    for (let i = 0; i < keys; i++) {
      const result = yield* Effect.either(operation.runDetailed({ key: `key-${i}`, payload: null }))
      if (result._tag === "Left") failed++
      else if (result.right.recorded) recorded.push(`key-${i}`)
      // a turn of the event loop between calls, so that the holder's lock can come and go
      yield* Effect.sleep("2 millis")
    }
    process.stdout.write(JSON.stringify({ recorded, failed }) + "\n")
  }).pipe(
    Effect.provide(
      SqlIdempotencyStore.layerWith({ table, callTimeout: "300 millis" }).pipe(
        Layer.provide(LibsqlClient.layer({ url: `file:${file}` }))
      )
    )
  )
}

const main = Effect.runPromise(
  role === "hold" ? hold(Number(process.argv[4])) : run(process.argv[4]!, Number(process.argv[5]), process.argv[6]!)
)

main.then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(String(error) + "\n")
    process.exit(1)
  }
)
