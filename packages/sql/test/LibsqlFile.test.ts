/**
 * A libSQL file shared by two processes, one of which holds the file's write lock for a while: the
 * other meets `SQLITE_BUSY`, after which `@libsql/client` 0.12 answers its connection's writes as
 * done while none of them reaches the file. The store must never answer an outcome as recorded on
 * such a connection: after both processes exit, every outcome a process answered as recorded is in
 * the file, and a later process (a retry of every key) runs no key a second time.
 */
import { IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { Children } from "@effect-idempotency/test-support"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { layerClient, scopedDatabaseFile, uniqueTable } from "./utils/databases.js"

const CHILD = fileURLToPath(new URL("./utils/libsqlChild.ts", import.meta.url))

/**
 * Starts the child with `args`: `onLine` is told each line it prints, `send` writes a line to its
 * stdin, and `done` is what it printed once it exited.
 */
const child = (args: ReadonlyArray<string>, onLine: (line: string) => void = () => {}) => {
  const started = Children.start(CHILD, args)
  let out = ""
  let err = ""
  started.stdout.on("data", (chunk) => {
    out += String(chunk)
    for (const line of String(chunk).split("\n")) if (line !== "") onLine(line)
  })
  started.stderr.on("data", (chunk) => (err += String(chunk)))
  const done = Effect.async<string, Error>((resume) => {
    started.on(
      "exit",
      (code) => resume(code === 0 ? Effect.succeed(out) : Effect.fail(new Error(`child ${args[0]}: ${code} ${err}`)))
    )
    return Effect.sync(() => started.kill("SIGKILL"))
  })
  return { done, send: (line: string) => started.stdin.write(`${line}\n`), kill: () => started.kill("SIGKILL") }
}

/** A promise and the function that resolves it. */
const signal = () => {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

interface Ran {
  readonly recorded: ReadonlyArray<string>
  readonly failed: number
}

const ranOf = (out: string): Ran => JSON.parse(out.trim().split("\n").pop()!) as Ran

describe("a libSQL file shared by two processes", () => {
  it.live(
    "no outcome is answered as recorded that the file does not hold, and no key runs twice",
    () =>
      Effect.gen(function*() {
        const file = yield* scopedDatabaseFile
        const table = uniqueTable("idem_libsql")
        const log = path.join(path.dirname(file), "executions.log")
        fs.writeFileSync(log, "")
        // the table exists before the processes start
        yield* SqlIdempotencyStore.make({ table, migrate: true }).pipe(Effect.provide(layerClient("libsql", { file })))
        const keys = 200
        // the runner loads and waits; the holder takes the write lock and keeps it 1.5 s; then the
        // runner starts, and meets the lock at once
        const ready = signal()
        const held = signal()
        const runner = child(["run", file, table, String(keys), log], (line) => line === "ready" && ready.resolve())
        const holder = child(["hold", file, "1500"], (line) => line === "held" && held.resolve())
        yield* Effect.addFinalizer(() => Effect.sync(() => [runner, holder].forEach((c) => c.kill())))
        yield* Effect.promise(() => Promise.all([ready.promise, held.promise]))
        runner.send("go")
        const first = ranOf(yield* runner.done)
        yield* holder.done
        // what the first process answered as recorded is in the file
        const records = yield* Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          return yield* Effect.forEach(first.recorded, (key) =>
            store.get(
              IdempotencyRecord.makeRecordId({ operation: "libsql-file", key: IdempotencyKey.unsafeMake(key) })
            ))
        }).pipe(
          Effect.provide(
            Layer.effect(IdempotencyStore.IdempotencyStore, SqlIdempotencyStore.make({ table })).pipe(
              Layer.provide(layerClient("libsql", { file }))
            )
          )
        )
        const missing = first.recorded.filter((_, i) => {
          const record = records[i]!
          return record._tag === "None" || record.value.status !== "COMPLETED"
        })
        assert.deepStrictEqual(missing, [], "answered as recorded, not in the file")
        // the first process met the lock: some of its calls failed, none was answered falsely
        assert.isAbove(first.failed, 0, "the runner met the holder's lock")
        // a retry of every key in a new process: nothing runs twice
        const again = child(["run", file, table, String(keys), log], (line) => line === "ready" && again.send("go"))
        const second = ranOf(yield* again.done)
        const executions = fs.readFileSync(log, "utf8").split("\n").filter((line) => line !== "")
        const twice = executions.filter((key, i) => executions.indexOf(key) !== i)
        assert.deepStrictEqual(twice, [], "keys that ran twice")
        assert.isAbove(second.recorded.length, 0)
      }).pipe(Effect.scoped),
    120_000
  )
})
